// Addresses the console uses for an image (thumbnail, absolute public URL); the copyable link
// forms themselves are shared with the server in src/shared/links.ts.
import type { ViewContext } from "./types";

/**
 * Thumbnail address. `w` must be one of process_widths (anything else is a 400), so the
 * grid asks for the smallest allowed width and the detail panel for a larger one; with
 * resizing switched off the original is served.
 */
export function thumbUrl(ctx: ViewContext, id: string, large = false): string {
  const widths = [...(ctx.config.process_widths ?? [])].sort((a, b) => a - b);
  const w = large ? (widths.find((x) => x >= 640) ?? widths.at(-1)) : widths[0];
  return `/api/admin/images/${encodeURIComponent(id)}/thumb${w ? `?w=${w}` : ""}`;
}

/** Absolute public address of an image whose `url` is site-relative ("/i/<id>"). */
export function publicUrl(ctx: ViewContext, url: string): string {
  return url.startsWith("/") ? ctx.origin.replace(/\/+$/, "") + url : url;
}
