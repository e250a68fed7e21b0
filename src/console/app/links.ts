// Addresses the console builds: thumbnails and the copyable forms of an image link.
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

export function linkForms(url: string, name: string): { label: string; text: string }[] {
  const alt = name.replace(/[\[\]"<>]/g, "");
  const attr = url.replace(/&/g, "&amp;").replace(/"/g, "&quot;");
  return [
    { label: "URL", text: url },
    { label: "Markdown", text: `![${alt}](${url})` },
    { label: "HTML", text: `<img src="${attr}" alt="${alt}">` },
  ];
}
