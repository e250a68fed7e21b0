import type { Metadata } from "sharp";

/**
 * The EXIF orientation a browser applies when it shows the file, which is what Kura reports as
 * the displayed size and bakes into variants. CSS Images 3 ignores orientation metadata that comes
 * after the image data: a WebP's EXIF chunk follows its bitstream (container spec), so no browser
 * rotates a WebP (Chromium 156 measured: o6.webp shows 80x120 unrotated), while libvips reports
 * its tag; before, Kura's size, thumbnails and Chevereto's width/height were rotated and the
 * original shown beside them was not (image-fidelity audit LOW-3). For PNG libvips reports eXIf
 * only when it precedes IDAT, exactly when browsers apply it; JPEG's APP1 always precedes.
 */
export function displayedOrientation(meta: Pick<Metadata, "format" | "orientation">): number {
  return meta.format === "webp" ? 1 : (meta.orientation ?? 1);
}
