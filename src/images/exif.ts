// `exif_policy=strip`: remove EXIF (camera, GPS, thumbnails), XMP, IPTC and comments while
// keeping what the viewer sees, including the displayed orientation.
//
// Every format is handled LOSSLESSLY by walking the container and dropping metadata
// segments/chunks/blocks/items; pixel data is copied byte for byte. When the original EXIF said
// to rotate/flip (orientation 2..8), or marked a camera's Adobe RGB (InteropIndex R03), a minimal
// new EXIF block holding only those tags is written back, so the picture looks the same. JPEG is
// in exif-jpeg.ts (with HDR gain maps), AVIF in exif-avif.ts (an edit of the HEIF item structure:
// AVIF orientation is irot/imir, never EXIF), PNG, WebP and GIF below.
//
// A file whose structure the walkers refuse is RE-ENCODED by sharp with the orientation applied
// to the pixels and no metadata: lossy, but guaranteed clean.
import sharp from "sharp";
import { readFile, writeFile } from "node:fs/promises";
import { crc32 } from "node:zlib";
import { stripAvif } from "./exif-avif";
import { stripJpeg } from "./exif-jpeg";
import { EXIF_PREFIX, exifFacts, type ExifFacts, exifWorthKeeping, joined, MalformedImageError, minimalExif, type StrippedImage } from "./exif-parts";
import { displayedOrientation } from "./orientation";
import { SNIFF_BYTES, sniffImageType } from "./sniff";

export { MalformedImageError, type StrippedImage };

export async function stripMetadata(inputPath: string, outputPath: string, mime: string): Promise<void> {
  await writeFile(outputPath, await stripMetadataToBuffer(await readFile(inputPath), mime));
}

/**
 * `stripMetadata` on bytes in memory (small uploads never touch a temp file). Takes `src` over:
 * the result may be its memory, rearranged, so the caller must not use `src` afterwards.
 */
export async function stripMetadataToBuffer(src: Buffer, mime: string): Promise<Buffer> {
  return stripLosslessly(src, mime) ?? reencodeWithoutMetadata(src, mime);
}

/**
 * The lossless strip of bytes in memory, taking `src` over like `stripMetadataToBuffer`; undefined
 * (with `src` untouched) when only a re-encode can remove the metadata: a structure our walker
 * refuses (decoders are more lenient than it, and re-encoding still leaves no metadata).
 * It decodes nothing, so it may run before the image's header has been checked.
 */
export function stripLosslessly(src: Buffer, mime: string): Buffer | undefined {
  try {
    return stripMetadataBytes(src, mime, true).bytes;
  } catch (err) {
    if (err instanceof MalformedImageError) return undefined;
    throw err;
  }
}

/**
 * Lossless strip for JPEG, PNG, WebP, GIF and AVIF. Throws MalformedImageError on broken or
 * unexpected structure (before touching `src`). With `reuseSource` the result may be `src`'s own memory, rearranged:
 * only for a caller that no longer needs the source.
 */
export function stripMetadataBytes(src: Buffer, mime: string, reuseSource = false): StrippedImage {
  switch (mime) {
    case "image/jpeg":
      return stripJpeg(src, reuseSource);
    case "image/png":
      return stripPng(src, reuseSource);
    case "image/webp":
      return stripWebp(src);
    case "image/gif":
      return { bytes: stripGif(src), orientation: 1 };
    case "image/avif":
      return { bytes: stripAvif(src, reuseSource), orientation: 1 };
    default:
      throw new Error(`不支持去除该格式的元数据：${mime}`);
  }
}

/** EXIF orientation (1..8) the viewer applies when displaying the file; 1 when none. */
export async function readOrientation(path: string): Promise<number> {
  const src = await readFile(path);
  const mime = sniffImageType(src.subarray(0, SNIFF_BYTES))?.mime;
  if (mime === "image/jpeg" || mime === "image/png" || mime === "image/webp") {
    try {
      return stripMetadataBytes(src, mime).orientation;
    } catch (err) {
      if (!(err instanceof MalformedImageError)) throw err;
    }
  }
  return (await sharp(src).metadata()).orientation ?? 1;
}

const REENCODE_OPTIONS = { jpeg: { quality: 92 }, png: {}, webp: { quality: 90 }, gif: {}, avif: { quality: 70 } } as const;

/** Removes metadata by decoding and encoding again (lossy, but nothing survives); decodes, so only after the header's checks. */
export async function reencodeWithoutMetadata(input: Buffer, mime: string): Promise<Buffer> {
  const format = mime.replace(/^image\//, "") as keyof typeof REENCODE_OPTIONS;
  if (!(format in REENCODE_OPTIONS)) throw new Error(`不支持去除该格式的元数据：${mime}`);
  const meta = await sharp(input, { limitInputPixels: false }).metadata();
  const animated = (meta.pages ?? 1) > 1;
  let img = sharp(input, { animated, limitInputPixels: false });
  // Bake the orientation into the pixels, since no EXIF will be left to carry it. (AVIF's
  // decoder already applies irot/imir, so this is a no-op there; animated frames carry no
  // orientation.) sharp writes no metadata unless asked; the colour profile is not personal
  // data and keeps colours right. Only for files the walkers refuse: an AVIF's nclx colour,
  // bit depth and HDR signalling do not survive this.
  // A WebP's orientation is not applied by browsers (orientation.ts): its pixels stay as shown.
  if (!animated && displayedOrientation(meta) > 1) img = img.rotate();
  return img.keepIccProfile().toFormat(format, REENCODE_OPTIONS[format]).toBuffer();
}

// ---------------------------------------------------------------- PNG

const PNG_SIGNATURE = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);
// Text chunks carry XMP, comments, author, software, creation time; eXIf carries EXIF;
// tIME is the last-modified time. iDOT (Apple) holds byte offsets into the file that our
// edits could invalidate, and it is only a decoding hint.
const PNG_DROP = new Set(["eXIf", "tEXt", "zTXt", "iTXt", "tIME", "iDOT"]);

function stripPng(src: Buffer, reuseSource: boolean): StrippedImage {
  if (!src.subarray(0, 8).equals(PNG_SIGNATURE)) throw new MalformedImageError("PNG 文件头无效");
  const kept: Buffer[] = [src.subarray(0, 8)];
  let facts: ExifFacts = { orientation: 1 };
  let sawExif = false;
  let sawImageData = false;
  let exifPrefixed = false;
  let pos = 8;
  let ended = false;
  while (!ended) {
    if (pos + 12 > src.length) throw new MalformedImageError("PNG 缺少 IEND");
    const type = src.toString("latin1", pos + 4, pos + 8);
    const end = pos + 12 + src.readUInt32BE(pos);
    if (end > src.length) throw new MalformedImageError("PNG 块长度无效");
    // An eXIf after the image data is ignored by browsers (and libvips): its orientation never
    // showed, so it must not be written back where it would start to (image-fidelity audit LOW-3).
    if (type === "IDAT") sawImageData = true;
    if (type === "eXIf" && !sawExif && !sawImageData) {
      const data = src.subarray(pos + 8, end - 4);
      sawExif = true;
      exifPrefixed = data.subarray(0, 6).equals(EXIF_PREFIX);
      facts = exifFacts(data);
    }
    if (!PNG_DROP.has(type)) kept.push(src.subarray(pos, end));
    ended = type === "IEND"; // anything after IEND is dropped
    pos = end;
  }
  if (kept[1]?.toString("latin1", 4, 8) !== "IHDR") throw new MalformedImageError("PNG 缺少 IHDR");
  // eXIf must come before the image data; right after IHDR is always valid.
  if (exifWorthKeeping(facts)) kept.splice(2, 0, pngChunk("eXIf", minimalExif(facts, exifPrefixed)));
  return { bytes: joined(src, kept, reuseSource), orientation: facts.orientation };
}

function pngChunk(type: string, data: Buffer): Buffer {
  const chunk = Buffer.alloc(12 + data.length);
  chunk.writeUInt32BE(data.length, 0);
  chunk.write(type, 4, "latin1");
  data.copy(chunk, 8);
  chunk.writeUInt32BE(crc32(chunk.subarray(4, 8 + data.length)), 8 + data.length);
  return chunk;
}

// ---------------------------------------------------------------- WebP

const VP8X_EXIF = 0x08;
const VP8X_XMP = 0x04;

function stripWebp(src: Buffer): StrippedImage {
  if (src.length < 20 || src.toString("latin1", 0, 4) !== "RIFF" || src.toString("latin1", 8, 12) !== "WEBP") {
    throw new MalformedImageError("WebP 文件头无效");
  }
  const riffEnd = 8 + src.readUInt32LE(4);
  if (riffEnd > src.length) throw new MalformedImageError("WebP 文件不完整");
  // Simple (lossy/lossless without VP8X) files have no place for metadata: only trim
  // whatever trails the RIFF container.
  if (src.toString("latin1", 12, 16) !== "VP8X") return { bytes: src.subarray(0, riffEnd), orientation: 1 };

  const kept: Buffer[] = [];
  let facts: ExifFacts = { orientation: 1 };
  let exifPrefixed = false;
  for (let pos = 12; pos < riffEnd; ) {
    if (pos + 8 > riffEnd) throw new MalformedImageError("WebP 块头不完整");
    const fourcc = src.toString("latin1", pos, pos + 4);
    const size = src.readUInt32LE(pos + 4);
    const dataEnd = pos + 8 + size;
    if (dataEnd > riffEnd) throw new MalformedImageError("WebP 块长度无效");
    // Chunks are padded to even length; tolerate a missing pad byte on the last chunk.
    const end = Math.min(dataEnd + (size & 1), riffEnd);
    if (fourcc === "EXIF") {
      const data = src.subarray(pos + 8, dataEnd);
      exifPrefixed = data.subarray(0, 6).equals(EXIF_PREFIX);
      facts = exifFacts(data);
    } else if (fourcc !== "XMP ") {
      const chunk = src.subarray(pos, end);
      const padMissing = end - pos < 8 + size + (size & 1);
      kept.push(padMissing ? Buffer.concat([chunk, Buffer.alloc(1)]) : chunk);
    }
    pos = end;
  }
  const vp8x = Buffer.from(kept[0]); // copy: we change its flags
  vp8x[8] &= ~(VP8X_EXIF | VP8X_XMP);
  kept[0] = vp8x;
  if (exifWorthKeeping(facts)) {
    vp8x[8] |= VP8X_EXIF;
    kept.push(riffChunk("EXIF", minimalExif(facts, exifPrefixed))); // EXIF goes after the image data
  }
  const body = Buffer.concat(kept);
  const header = Buffer.alloc(12);
  header.write("RIFF", 0, "latin1");
  header.writeUInt32LE(body.length + 4, 4);
  header.write("WEBP", 8, "latin1");
  return { bytes: Buffer.concat([header, body]), orientation: facts.orientation };
}

function riffChunk(fourcc: string, data: Buffer): Buffer {
  const head = Buffer.alloc(8);
  head.write(fourcc, 0, "latin1");
  head.writeUInt32LE(data.length, 4);
  return Buffer.concat([head, data, Buffer.alloc(data.length & 1)]);
}

// ---------------------------------------------------------------- GIF

// Application extensions that affect display: looping (NETSCAPE/ANIMEXTS) and the colour
// profile. Others (XMP, Photoshop/IPTC from ImageMagick, ...) are metadata and dropped,
// as are comment extensions. GIF has no EXIF, so there is no orientation to keep.
const GIF_KEEP_APPS = new Set(["NETSCAPE2.0", "ANIMEXTS1.0", "ICCRGBG1012"]);

function stripGif(src: Buffer): Buffer {
  const version = src.toString("latin1", 0, 6);
  if ((version !== "GIF87a" && version !== "GIF89a") || src.length < 13) throw new MalformedImageError("GIF 文件头无效");
  let pos = 13 + colourTableSize(src[10]);
  const kept: Buffer[] = [src.subarray(0, pos)];
  for (;;) {
    // A file that just stops between blocks is displayed by browsers; close it properly.
    if (pos >= src.length) return Buffer.concat([...kept, Buffer.from([0x3b])]);
    const introducer = src[pos];
    if (introducer === 0x3b) return Buffer.concat([...kept, src.subarray(pos, pos + 1)]); // trailer; drop what follows
    if (introducer === 0x2c) {
      // Image descriptor (10 bytes), local colour table, LZW code size, data sub-blocks.
      if (pos + 11 > src.length) throw new MalformedImageError("GIF 图像块不完整");
      const end = skipSubBlocks(src, pos + 10 + colourTableSize(src[pos + 9]) + 1);
      kept.push(src.subarray(pos, end));
      pos = end;
    } else if (introducer === 0x21) {
      const label = src[pos + 1];
      const end = skipSubBlocks(src, pos + 2);
      const keep =
        label === 0xf9 || // graphic control: frame delay, disposal, transparency
        label === 0x01 || // plain text: rendered content
        (label === 0xff && src[pos + 2] === 11 && GIF_KEEP_APPS.has(src.toString("latin1", pos + 3, pos + 14)));
      if (keep) kept.push(src.subarray(pos, end));
      pos = end;
    } else {
      throw new MalformedImageError("GIF 块类型无效");
    }
  }
}

function colourTableSize(flags: number): number {
  return flags & 0x80 ? 3 * (2 << (flags & 7)) : 0;
}

function skipSubBlocks(src: Buffer, pos: number): number {
  for (;;) {
    if (pos >= src.length) throw new MalformedImageError("GIF 数据子块不完整");
    const size = src[pos];
    pos += 1 + size;
    if (size === 0) return pos;
  }
}
