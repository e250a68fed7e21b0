import { Invalid } from "../../errors";
import { serverFaultBehind } from "../pixel-faults";
import { displayedOrientation } from "../orientation";
import sharp, { type Metadata } from "sharp";
import { rm } from "node:fs/promises";
import { sha256Hex } from "../../auth/secrets";
import { MalformedImageError, reencodeWithoutMetadata, stripLosslessly, stripMetadata, stripMetadataBytes } from "../exif";
import { frameBudgetMessage } from "../frame-budget";
import { APNG_MIME, isAnimatedPng, isAvifSequence, SNIFF_BYTES, sniffImageType } from "../sniff";
import { awaitedLater } from "../../shared/awaited-later";
import { tempPath, type ReceivedFile } from "./receive";

/** What an image shows: its displayed size (EXIF orientation applied). */
export interface Dimensions {
  width: number;
  height: number;
}

/** A storable image; its bytes are in memory or in a temp file, like the upload they came from. */
export type PreparedImage = Pick<ReceivedFile, "path" | "bytes"> & {
  size: number;
  sha256: string;
  mime: string;
  ext: string;
  /**
   * The header's checks (decodable, pixel and frame budget) and the displayed size. They run
   * in sharp's threads while the bytes are being written: the store publishes nothing and
   * commits nothing before this resolves, and rejects with its 415/422 when it rejects.
   */
  dimensions: Promise<Dimensions>;
};

export type ExifPolicy = "strip" | "passthrough";

export const unsupported = () => new Invalid("不支持的图片格式（仅支持 JPEG、PNG、GIF、WebP、AVIF）", "unsupported_type");
/**
 * Content that starts as a supported format but cannot be read (cut off, damaged): still a 415,
 * but saying so, where "unsupported format" misled the owner of a PNG that was cut in half.
 */
const damaged = (type: { ext: string; sequence?: boolean }) =>
  type.sequence
    ? // An AVIF image sequence (animated AVIF) libvips cannot open: it is not damaged, browsers play it.
      new Invalid("不支持动画 AVIF（图像序列）：请上传静态 AVIF，或把动画转为 GIF 或 WebP", "unsupported_type")
    : new Invalid(`图片数据不完整或已损坏，无法读取（${type.ext.toUpperCase()}）`, "unsupported_type");

export async function sha256File(path: string): Promise<string> {
  const hasher = new Bun.CryptoHasher("sha256");
  for await (const chunk of Bun.file(path).stream()) hasher.update(chunk);
  return hasher.digest("hex");
}

/**
 * Reads the header with sharp (no full decode) and checks the budgets: 415 when sharp cannot
 * read it, 422 over the pixel or frame budget. Animated frames all count, since all are decoded.
 */
async function describe(input: Buffer | string, maxPixels: number, type: { ext: string; sequence?: boolean }): Promise<Dimensions> {
  let meta: Metadata;
  try {
    meta = await sharp(input, { animated: true, limitInputPixels: false }).metadata();
  } catch (err) {
    throw (await serverFaultBehind(err)) ?? damaged(type);
  }
  const frameHeight = meta.pageHeight ?? meta.height ?? 0;
  const width = meta.width ?? 0;
  const pixels = width * (meta.height ?? 0);
  if (!width || !frameHeight) throw damaged(type);
  if (pixels > maxPixels) throw new Invalid(`图片分辨率超过上限（${Math.round(maxPixels / 1e6)} 百万像素）`, "unprocessable");
  const overFrames = frameBudgetMessage(meta.pages ?? 1);
  if (overFrames) throw new Invalid(overFrames, "unprocessable");
  // Displayed size: orientations 5–8 swap width and height (where a browser applies them).
  const swap = displayedOrientation(meta) >= 5;
  return { width: swap ? frameHeight : width, height: swap ? width : frameHeight };
}

/**
 * Refuses (415) an image that is cut off or damaged past its header, for `passthrough`, which
 * otherwise reads only the header. In memory the container walk of the lossless strip sees that
 * without decoding (a JPEG with no EOI, a PNG with no IEND, AVIF data outside the file); on disk
 * the file's last bytes do (endsWhole). Whatever neither settles is decoded whole.
 */
async function assertWhole(input: Buffer | string, mime: string, reading: { ext: string; sequence?: boolean }): Promise<void> {
  if (typeof input === "string") {
    // A large upload streamed to disk is not read into memory for the walk: a PNG that ends with
    // IEND, a JPEG with EOI (most of them) are whole; anything else is decoded in libvips' threads.
    const file = Bun.file(input);
    const [head, tail] = await Promise.all([file.slice(0, 12).arrayBuffer(), file.slice(-12).arrayBuffer()]);
    if (endsWhole(new Uint8Array(head), new Uint8Array(tail), file.size, mime)) return;
  } else {
    try {
      stripMetadataBytes(input, mime); // reads `input`, never changes it
      return;
    } catch (err) {
      if (!(err instanceof MalformedImageError)) throw err;
    }
  }
  try {
    await sharp(input, { animated: true, failOn: "truncated", limitInputPixels: false }).stats();
  } catch (err) {
    throw (await serverFaultBehind(err)) ?? damaged(reading);
  }
}

const PNG_END = Buffer.from([0, 0, 0, 0, 0x49, 0x45, 0x4e, 0x44, 0xae, 0x42, 0x60, 0x82]);

/**
 * True when the file visibly ends where its format ends: IEND for PNG, EOI for JPEG, the trailer
 * for GIF, the RIFF length for WebP. False means "look closer", not "damaged".
 */
function endsWhole(head: Uint8Array, tail: Uint8Array, size: number, mime: string): boolean {
  const last = tail.length - 1;
  if (mime === "image/png") return Buffer.from(tail).equals(PNG_END);
  if (mime === "image/jpeg") return last >= 1 && tail[last - 1] === 0xff && tail[last] === 0xd9;
  if (mime === "image/gif") return tail[last] === 0x3b;
  if (mime === "image/webp") return head.length === 12 && Buffer.from(head).readUInt32LE(4) + 8 === size;
  return false;
}

/**
 * Turns a received upload into a storable image: type judged by content (415), metadata
 * stripped per policy, then hashed (reusing the hash taken while receiving when the bytes
 * are unchanged). The header's checks (`dimensions`) run alongside: a lossless strip walks
 * the container without decoding anything, so they can wait until the bytes are on their way
 * to storage. Only a re-encode (a container our walker rejects) decodes, and that
 * waits for the checks. A stripped file upload gets a new temp file; the caller removes both.
 */
export async function prepareImage(received: ReceivedFile, opts: { exifPolicy: ExifPolicy; maxPixels: number; tmpDir: string }): Promise<PreparedImage> {
  const head = received.bytes ? received.bytes.subarray(0, SNIFF_BYTES) : new Uint8Array(await Bun.file(received.path).slice(0, SNIFF_BYTES).arrayBuffer());
  const type = sniffImageType(head);
  // Still 415 (spec 7: judged by content), but an empty file is told as such, not as a wrong format.
  if (!type) throw received.size === 0 ? new Invalid("文件为空（0 字节），不是图片", "unsupported_type") : unsupported();
  // An APNG is stored under its own type, so delivery never hands out a still re-encode of it.
  const kind = { mime: isAnimatedPng(head) ? APNG_MIME : type.mime, ext: type.ext };
  // How a header sharp cannot read is reported: an animated AVIF is not damaged, only unsupported.
  const reading = { ext: type.ext, sequence: isAvifSequence(head) };

  if (opts.exifPolicy !== "strip") {
    const input = received.bytes ?? received.path!;
    // Kept as sent, so nothing below would read past the header: a file cut off mid-way was stored.
    const dimensions = awaitedLater(describe(input, opts.maxPixels, reading).then(async (d) => (await assertWhole(input, type.mime, reading), d)));
    const sha256 = received.sha256 ?? (received.bytes ? sha256Hex(received.bytes) : await sha256File(received.path));
    return { path: received.path, bytes: received.bytes, size: received.size, sha256, ...kind, dimensions } as PreparedImage;
  }
  if (received.bytes) {
    const stripped = stripLosslessly(received.bytes, type.mime);
    if (stripped) {
      // The header is read from the stripped bytes, which keep the orientation (see exif.ts).
      const dimensions = awaitedLater(describe(stripped, opts.maxPixels, reading));
      return { bytes: stripped, size: stripped.length, sha256: sha256Hex(stripped), ...kind, dimensions };
    }
    const dimensions = await describe(received.bytes, opts.maxPixels, reading);
    const bytes = await reencodeWithoutMetadata(received.bytes, type.mime).catch(async (err) => {
      throw (await serverFaultBehind(err)) ?? damaged(reading);
    });
    return { bytes, size: bytes.length, sha256: sha256Hex(bytes), ...kind, dimensions: Promise.resolve(dimensions) };
  }
  const dimensions = await describe(received.path, opts.maxPixels, reading);
  const stripped = tempPath(opts.tmpDir, "strip");
  try {
    await stripMetadata(received.path, stripped, type.mime);
  } catch (err) {
    await rm(stripped, { force: true });
    // A full disk or missing descriptors are the server's trouble (503), not the image's.
    throw (await serverFaultBehind(err)) ?? damaged(reading);
  }
  return { path: stripped, size: Bun.file(stripped).size, sha256: await sha256File(stripped), ...kind, dimensions: Promise.resolve(dimensions) };
}
