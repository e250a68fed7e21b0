// Addresses the console uses for an image (thumbnail, absolute public URL); the copyable link
// forms themselves are shared with the server in src/shared/links.ts.
import { h } from "./dom";
import type { ViewContext } from "./types";

/** The `format` value (a process_formats name) that asks for a stored type as itself. */
const OWN_FORMAT: Record<string, string> = {
  "image/jpeg": "jpeg",
  "image/png": "png",
  "image/apng": "png",
  "image/webp": "webp",
  "image/avif": "avif",
  "image/gif": "gif",
};
/** Every format the server can be allowed to write, most widely enabled first (the defaults lack gif). */
const FORMATS = ["webp", "png", "jpeg", "avif", "gif"];

/**
 * Thumbnail addresses, best first. The thumb endpoint runs the /i/ pipeline (spec 4.4), so in
 * redirect access mode a plain request for an original is a 302 to the channel's public address,
 * which the console's CSP (img-src 'self') refuses: a thumbnail must ask for processing, which
 * is always answered by Kura (spec 4.5 rule 3). `w` must be one of process_widths (the grid asks
 * for the smallest, the detail panel for one ≥ 640); without widths, `format` — the stored type's
 * own name first, which returns the stored bytes, then any other that process_formats may allow
 * (an unallowed one answers 400 and the next is tried). The plain address stays first in proxy
 * mode, where it is the original served by Kura.
 */
export function thumbUrls(ctx: ViewContext, id: string, mime?: string, large = false): string[] {
  const base = `/api/admin/images/${encodeURIComponent(id)}/thumb`;
  const widths = [...(ctx.config.process_widths ?? [])].sort((a, b) => a - b);
  const w = large ? (widths.find((x) => x >= 640) ?? widths.at(-1)) : widths[0];
  const own = mime ? OWN_FORMAT[mime] : undefined;
  const formats = [...new Set([own ?? FORMATS[0]!, ...FORMATS])].map((f) => `${base}?format=${f}`);
  return [...(w ? [`${base}?w=${w}`] : []), ...(ctx.config.access_mode === "redirect" ? [] : [base]), ...formats];
}

/** The first thumbnail address (for links that open it in a new tab). */
export function thumbUrl(ctx: ViewContext, id: string, mime?: string, large = false): string {
  return thumbUrls(ctx, id, mime, large)[0]!;
}

interface ThumbOptions {
  alt: string;
  /** The stored type, when known: its own `format` comes first (no conversion). */
  mime?: string;
  large?: boolean;
  lazy?: boolean;
  width?: number;
  height?: number;
}

/**
 * A thumbnail <img> that moves on to the next address when one fails (a width or format the settings
 * no longer allow answers 400) and says it cannot be shown when none works.
 */
export function thumbImage(ctx: ViewContext, id: string, opts: ThumbOptions): HTMLImageElement {
  const urls = thumbUrls(ctx, id, opts.mime, opts.large);
  const { alt, width, height } = opts;
  const img = h("img", { alt, width, height, loading: opts.lazy ? "lazy" : undefined, decoding: "async" });
  let next = 0;
  img.addEventListener("error", () => {
    if (next < urls.length) img.src = urls[next++]!;
    else {
      img.alt = "无法显示缩略图";
      img.classList.add("thumb-failed");
    }
  });
  img.src = urls[next++]!;
  return img;
}

/** Absolute public address of an image whose `url` is site-relative ("/i/<id>"). */
export function publicUrl(ctx: ViewContext, url: string): string {
  return url.startsWith("/") ? ctx.origin.replace(/\/+$/, "") + url : url;
}
