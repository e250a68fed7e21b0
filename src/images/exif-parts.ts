// The format-independent parts of metadata stripping (exif.ts walks the containers): the few EXIF
// facts a stripped file must keep, and putting the kept pieces of a file back together.

/** The container doesn't have the structure its format requires. */
export class MalformedImageError extends Error {}

export interface StrippedImage {
  bytes: Buffer;
  /** EXIF orientation (1..8) found in the original; 1 when absent. */
  orientation: number;
}

export const EXIF_PREFIX = Buffer.from("Exif\0\0", "latin1");
const ORIENTATION_TAG = 0x0112;
const EXIF_IFD_TAG = 0x8769;
const COLOR_SPACE_TAG = 0xa001;
const INTEROP_IFD_TAG = 0xa005;
const INTEROP_INDEX_TAG = 0x0001;

/**
 * What of an EXIF block changes how the picture looks, so a strip writes it back: the orientation,
 * and the DCF "option file" marking of a camera's Adobe RGB mode (InteropIndex "R03" with its
 * ColorSpace, usually 0xFFFF Uncalibrated) that colour-managed editors read when there is no ICC
 * profile. ColorSpace alone is not kept: 1 is sRGB, what every reader assumes anyway, and the
 * 0xFFFF that editors write next to an ICC profile says nothing the profile does not.
 */
export interface ExifFacts {
  /** 1..8; 1 when absent or invalid. */
  orientation: number;
  /** Set only for an R03 file: its ColorSpace value, or null when it has none. */
  adobeRgb?: { colorSpace: number | null };
}

/** True when a stripped file needs a minimal EXIF block to keep `facts`. */
export const exifWorthKeeping = (facts: ExifFacts) => facts.orientation !== 1 || facts.adobeRgb !== undefined;

/** The facts of an EXIF payload (TIFF structure, optionally preceded by "Exif\0\0"); bounds-checked, never throws. */
/** A TIFF structure's 16- and 32-bit readers in its byte order, once its header (`II`/`MM`, 42) checks out. */
export function tiffReaders(tiff: Buffer): { u16: (offset: number) => number; u32: (offset: number) => number } | undefined {
  if (tiff.length < 8) return undefined;
  const order = tiff.toString("latin1", 0, 2);
  if (order !== "II" && order !== "MM") return undefined;
  const le = order === "II";
  const u16 = (o: number) => (le ? tiff.readUInt16LE(o) : tiff.readUInt16BE(o));
  const u32 = (o: number) => (le ? tiff.readUInt32LE(o) : tiff.readUInt32BE(o));
  return u16(2) === 42 ? { u16, u32 } : undefined;
}

export function exifFacts(payload: Buffer): ExifFacts {
  const tiff = payload.subarray(0, 6).equals(EXIF_PREFIX) ? payload.subarray(6) : payload;
  const none: ExifFacts = { orientation: 1 };
  const readers = tiffReaders(tiff);
  if (!readers) return none;
  const { u16, u32 } = readers;
  /** The IFD at `ifd` as tag → offset of its 12-byte entry (entries past the end are ignored). */
  const entries = (ifd: number) => {
    const found = new Map<number, number>();
    if (ifd < 8 || ifd + 2 > tiff.length) return found;
    const count = u16(ifd);
    for (let i = 0; i < count; i++) {
      const entry = ifd + 2 + i * 12;
      if (entry + 12 > tiff.length) break;
      if (!found.has(u16(entry))) found.set(u16(entry), entry);
    }
    return found;
  };
  /** SHORT or LONG value of an entry (count 1). */
  const number = (entry: number | undefined) => {
    if (entry === undefined) return undefined;
    const type = u16(entry + 2);
    return type === 3 ? u16(entry + 8) : type === 4 || type === 13 ? u32(entry + 8) : undefined;
  };
  const ifd0 = entries(u32(4));
  const o = number(ifd0.get(ORIENTATION_TAG));
  const facts: ExifFacts = { orientation: o !== undefined && o >= 1 && o <= 8 ? o : 1 };
  const exifIfd = entries(number(ifd0.get(EXIF_IFD_TAG)) ?? 0);
  const interop = entries(number(exifIfd.get(INTEROP_IFD_TAG)) ?? 0).get(INTEROP_INDEX_TAG);
  // ASCII "R03\0": four bytes, so stored inside the entry.
  if (interop !== undefined && u16(interop + 2) === 2 && u32(interop + 4) <= 4 && tiff.toString("latin1", interop + 8, interop + 11) === "R03") {
    facts.adobeRgb = { colorSpace: number(exifIfd.get(COLOR_SPACE_TAG)) ?? null };
  }
  return facts;
}

/** Orientation from an EXIF payload (TIFF structure, optionally preceded by "Exif\0\0"). */
export const orientationFromExif = (payload: Buffer): number => exifFacts(payload).orientation;

/**
 * A complete TIFF structure holding only `facts`: IFD0 with Orientation (when not 1) and, for an
 * R03 file, an Exif IFD with ColorSpace and an Interoperability IFD with InteropIndex "R03".
 * Nothing else of the original (camera, dates, GPS, thumbnails) comes along.
 */
export function minimalExif(facts: ExifFacts, withPrefix: boolean): Buffer {
  type Entry = [tag: number, type: number, value: number | "R03"];
  const ifd0: Entry[] = [];
  if (facts.orientation !== 1) ifd0.push([ORIENTATION_TAG, 3, facts.orientation]);
  const exifIfd: Entry[] = [];
  const interopIfd: Entry[] = [];
  if (facts.adobeRgb) {
    if (facts.adobeRgb.colorSpace !== null) exifIfd.push([COLOR_SPACE_TAG, 3, facts.adobeRgb.colorSpace & 0xffff]);
    interopIfd.push([INTEROP_INDEX_TAG, 2, "R03"]);
  }
  // Layout: header (8), IFD0, then the Exif IFD and the Interop IFD; each IFD is 2 + 12n + 4 bytes.
  const size = (entries: Entry[], extra: number) => (entries.length + extra ? 2 + 12 * (entries.length + extra) + 4 : 0);
  const exifAt = 8 + size(ifd0, exifIfd.length || interopIfd.length ? 1 : 0);
  const interopAt = exifAt + size(exifIfd, interopIfd.length ? 1 : 0);
  if (interopIfd.length) exifIfd.push([INTEROP_IFD_TAG, 4, interopAt]);
  if (exifIfd.length) ifd0.push([EXIF_IFD_TAG, 4, exifAt]);
  const tiff = Buffer.alloc(interopAt + size(interopIfd, 0));
  tiff.write("MM", 0, "latin1");
  tiff.writeUInt16BE(42, 2);
  tiff.writeUInt32BE(8, 4); // IFD0 right after the header
  const writeIfd = (at: number, entries: Entry[]) => {
    tiff.writeUInt16BE(entries.length, at);
    entries.forEach(([tag, type, value], i) => {
      const entry = at + 2 + i * 12;
      tiff.writeUInt16BE(tag, entry);
      tiff.writeUInt16BE(type, entry + 2);
      tiff.writeUInt32BE(value === "R03" ? 4 : 1, entry + 4); // count
      // Values fit in the 4-byte field, left-justified: SHORT in its first two bytes, "R03\0" whole.
      if (value === "R03") tiff.write("R03\0", entry + 8, "latin1");
      else if (type === 3) tiff.writeUInt16BE(value, entry + 8);
      else tiff.writeUInt32BE(value, entry + 8);
    });
    // the next-IFD offset after the entries stays 0 (none)
  };
  writeIfd(8, ifd0);
  if (exifIfd.length) writeIfd(exifAt, exifIfd);
  if (interopIfd.length) writeIfd(interopAt, interopIfd);
  return withPrefix ? Buffer.concat([EXIF_PREFIX, tiff]) : tiff;
}

/**
 * The kept pieces as one buffer. When they are the whole source, in order and untouched
 * (nothing to strip, the common case for images without metadata), that is the source
 * itself: no copy of a possibly large image. With `reuseSource` (the caller gives the source
 * up) pieces that all come from the source, in order, are moved down inside it instead of
 * copied into a new buffer: a 200 KB upload then costs no fresh allocation (page faults
 * and a copy, ~0.07 ms of the loop each).
 */
export function joined(src: Buffer, kept: Buffer[], reuseSource: boolean): Buffer {
  const start = src.byteOffset;
  const end = start + src.length;
  let offset = start;
  let ownPieces = true;
  let untouched = true;
  for (const piece of kept) {
    // Within the source's range, not just its ArrayBuffer: Node hands small Buffers out of shared pools.
    if (piece.buffer !== src.buffer || piece.byteOffset < offset || piece.byteOffset + piece.length > end) {
      ownPieces = false;
      break;
    }
    if (piece.byteOffset !== offset) untouched = false;
    offset = piece.byteOffset + piece.length;
  }
  if (ownPieces && untouched && offset === end) return src;
  if (!ownPieces || !reuseSource) return Buffer.concat(kept);
  // Each piece starts at or after where it lands, so moving them in order never overwrites one not yet moved.
  let at = 0;
  for (const piece of kept) {
    const from = piece.byteOffset - start;
    if (from !== at) src.copyWithin(at, from, from + piece.length);
    at += piece.length;
  }
  return src.subarray(0, at);
}
