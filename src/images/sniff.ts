// Decides an upload's image type from its CONTENT (magic bytes), never from the file name
// or the client's Content-Type: a file only counts as an image we serve if its first bytes
// say so. Anything a browser could interpret as active content (SVG, HTML, XML, PDF) or a
// format we don't deliver (HEIC, BMP, TIFF, ...) yields null.

export interface SniffedType {
  mime: string;
  ext: string;
}

/**
 * How many leading bytes the caller should pass in. JPEG/PNG/GIF/WebP are decided within
 * the first 16 bytes; AVIF needs the whole `ftyp` box, whose compatible-brand list can in
 * theory be long, so we ask for a generous 4 KiB (real ftyp boxes are 20–40 bytes).
 */
export const SNIFF_BYTES = 4096;

const JPEG: SniffedType = { mime: "image/jpeg", ext: "jpg" };
const PNG: SniffedType = { mime: "image/png", ext: "png" };
const GIF: SniffedType = { mime: "image/gif", ext: "gif" };
const WEBP: SniffedType = { mime: "image/webp", ext: "webp" };
const AVIF: SniffedType = { mime: "image/avif", ext: "avif" };

const PNG_SIGNATURE = [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a];
const AVIF_BRANDS = new Set(["avif", "avis"]);
// HEIF files that happen to list an AVIF brand are still HEVC-coded when their major brand
// says so; we can't serve those to browsers, so the major brand wins.
const HEIC_MAJOR_BRANDS = new Set(["heic", "heix", "heim", "heis", "hevc", "hevx", "hevm", "hevs"]);

export function sniffImageType(head: Uint8Array): SniffedType | null {
  if (startsWith(head, [0xff, 0xd8, 0xff])) return JPEG;
  if (startsWith(head, PNG_SIGNATURE)) return PNG;
  if (ascii(head, 0, 6) === "GIF87a" || ascii(head, 0, 6) === "GIF89a") return GIF;
  if (isWebp(head)) return WEBP;
  if (isAvif(head)) return AVIF;
  return null;
}

function isWebp(head: Uint8Array): boolean {
  if (ascii(head, 0, 4) !== "RIFF" || ascii(head, 8, 4) !== "WEBP") return false;
  // The first chunk must be one of the three WebP bitstream/extension chunks; a RIFF
  // container labelled WEBP with anything else is not something a browser will decode.
  const first = ascii(head, 12, 4);
  return first === "VP8 " || first === "VP8L" || first === "VP8X";
}

/** ISO-BMFF: [size:u32be]["ftyp"][major brand][minor version][compatible brands...]. */
function isAvif(head: Uint8Array): boolean {
  if (head.length < 16 || ascii(head, 4, 4) !== "ftyp") return false;
  const boxSize = u32(head, 0);
  // size 0 ("to end of file") and 1 (64-bit size) are legal for boxes in general but never
  // used for ftyp in practice; a box shorter than its fixed fields is corrupt.
  if (boxSize < 16) return false;
  const major = ascii(head, 8, 4);
  if (AVIF_BRANDS.has(major)) return true;
  if (HEIC_MAJOR_BRANDS.has(major)) return false;
  const end = Math.min(boxSize, head.length);
  for (let off = 16; off + 4 <= end; off += 4) {
    if (AVIF_BRANDS.has(ascii(head, off, 4))) return true;
  }
  return false;
}

function startsWith(head: Uint8Array, bytes: number[]): boolean {
  if (head.length < bytes.length) return false;
  return bytes.every((b, i) => head[i] === b);
}

/** The big-endian 32-bit unsigned integer at `offset` (box and chunk lengths); the caller checked it is in `head`. */
function u32(head: Uint8Array, offset: number): number {
  return ((head[offset]! << 24) | (head[offset + 1]! << 16) | (head[offset + 2]! << 8) | head[offset + 3]!) >>> 0;
}

function ascii(head: Uint8Array, offset: number, length: number): string {
  if (head.length < offset + length) return "";
  return String.fromCharCode(...head.subarray(offset, offset + length));
}

/** An AVIF whose major brand is `avis`: an image sequence (animated AVIF), which libvips cannot open. */
export function isAvifSequence(head: Uint8Array): boolean {
  return head.length >= 12 && ascii(head, 4, 4) === "ftyp" && ascii(head, 8, 4) === "avis";
}

/** The stored type of an animated PNG (prepare.ts): delivery serves it as stored, never re-encoded (a still frame). */
export const APNG_MIME = "image/apng";

/**
 * Whether a PNG is animated (APNG): its `acTL` chunk must come before the first `IDAT`, so the chunks
 * are walked from the signature within `head` (SNIFF_BYTES). Browsers play such a file, but libvips
 * reads only its default image, so delivery must never re-encode it. A head that ends before `IDAT`
 * (a huge ICC profile first) counts as still: the rest is not read.
 */
export function isAnimatedPng(head: Uint8Array): boolean {
  if (!startsWith(head, PNG_SIGNATURE)) return false;
  let off = PNG_SIGNATURE.length;
  while (off + 8 <= head.length) {
    const length = u32(head, off);
    const type = ascii(head, off + 4, 4);
    if (type === "acTL") return true;
    if (type === "IDAT" || type === "IEND") return false;
    off += 12 + length;
  }
  return false;
}
