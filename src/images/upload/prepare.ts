import sharp, { type Metadata } from "sharp";
import { rm } from "node:fs/promises";
import { ApiError } from "../../http/errors";
import { stripMetadata } from "../exif";
import { SNIFF_BYTES, sniffImageType } from "../sniff";
import { tempPath } from "./receive";

export interface PreparedImage {
  path: string;
  size: number;
  sha256: string;
  mime: string;
  ext: string;
  width: number;
  height: number;
}

export type ExifPolicy = "strip" | "passthrough";

export const unsupported = () => new ApiError(415, "不支持的图片格式（仅支持 JPEG、PNG、GIF、WebP、AVIF）");

export async function sha256File(path: string): Promise<string> {
  const hasher = new Bun.CryptoHasher("sha256");
  for await (const chunk of Bun.file(path).stream()) hasher.update(chunk);
  return hasher.digest("hex");
}

/**
 * Turns a received temp file into a storable image: type judged by content (415),
 * pixel budget checked from the header before any full decode (422), metadata
 * stripped per policy, then hashed (reusing the hash taken while receiving when the
 * bytes are unchanged). Consumes `path` (replaced when stripping).
 */
export async function prepareImage(
  path: string,
  opts: { exifPolicy: ExifPolicy; maxPixels: number; tmpDir: string; sha256?: string },
): Promise<PreparedImage> {
  const head = new Uint8Array(await Bun.file(path).slice(0, SNIFF_BYTES).arrayBuffer());
  const type = sniffImageType(head);
  if (!type) throw unsupported();

  let meta: Metadata;
  try {
    meta = await sharp(path, { animated: true, limitInputPixels: false }).metadata();
  } catch {
    throw unsupported();
  }
  const frameHeight = meta.pageHeight ?? meta.height ?? 0;
  const width = meta.width ?? 0;
  // Every frame of an animation is decoded, so the budget counts them all.
  const pixels = width * (meta.height ?? 0);
  if (!width || !frameHeight) throw unsupported();
  if (pixels > opts.maxPixels) throw new ApiError(422, `图片分辨率超过上限（${Math.round(opts.maxPixels / 1e6)} 百万像素）`);
  // Displayed size: orientations 5–8 swap width and height.
  const swap = (meta.orientation ?? 1) >= 5;

  let current = path;
  if (opts.exifPolicy === "strip") {
    const stripped = tempPath(opts.tmpDir, "strip");
    try {
      await stripMetadata(path, stripped, type.mime);
    } catch {
      await rm(stripped, { force: true });
      throw unsupported();
    }
    await rm(path, { force: true });
    current = stripped;
  }
  // The perceptual hash decodes pixels, so it is computed later by a job (see images/jobs.ts).
  const sha256 = current === path && opts.sha256 ? opts.sha256 : await sha256File(current);
  return {
    path: current,
    size: Bun.file(current).size,
    sha256,
    mime: type.mime,
    ext: type.ext,
    width: swap ? frameHeight : width,
    height: swap ? width : frameHeight,
  };
}
