// JPEG metadata strip: a walk over the segments that copies the image data byte for byte and drops
// metadata segments. An HDR gain-map JPEG (a primary image, then a gain-map JPEG after its EOI
// that an MPF index points to) keeps its gain map and the segments that describe it, with any
// EXIF/XMP inside the gain-map image removed too (exif-gainmap.ts says what is kept and why).
import { hdrgmXmp, ISO_GAIN_MAP_ID, MPF_ID, type MpfImage, mpfSegment, mpfSegmentLength, readMpf, XMP_ID } from "./exif-gainmap";
import { EXIF_PREFIX, exifFacts, type ExifFacts, exifWorthKeeping, joined, MalformedImageError, minimalExif, type StrippedImage } from "./exif-parts";

const startsWith = (payload: Buffer, id: string) => payload.length >= id.length && payload.toString("latin1", 0, id.length) === id;

/** What a walk over one JPEG image (SOI to EOI) keeps. */
interface JpegWalk {
  pieces: Buffer[];
  /** Offset just past the image's EOI (the end of the data when it has none). */
  end: number;
  facts: ExifFacts;
  /** Indexes in `pieces` of gain-map metadata (ISO 21496-1, hdrgm XMP): kept only with a gain map. */
  gainMapPieces: number[];
  /** An hdrgm XMP packet is kept already (one per image). */
  hasHdrgmXmp: boolean;
  /** The primary's MPF segment: its index in `pieces` (a placeholder) and where its TIFF header starts in the source. */
  mpf?: { index: number; images: MpfImage[]; tiffAt: number };
}

function segment(marker: number, payload: Buffer): Buffer {
  const head = Buffer.from([0xff, marker, 0, 0]);
  head.writeUInt16BE(payload.length + 2, 2);
  return Buffer.concat([head, payload]);
}

/**
 * Walks the image starting at `start` (its SOI). Kept APPn segments: JFIF (APP0), ICC profile
 * (APP2), Adobe (APP14, which tells the decoder how to convert colours), the gain-map segments
 * (see exif-gainmap.ts) and, in the primary only, the MPF index. Every other APPn (Exif and other
 * XMP APP1, IPTC APP13, vendor blocks) and COM is dropped. Non-APP markers (DQT, SOFn, DHT, DRI,
 * SOS, ...) are image data and kept as they are.
 */
function walkJpeg(src: Buffer, start: number, primary: boolean): JpegWalk {
  if (start + 4 > src.length || src[start] !== 0xff || src[start + 1] !== 0xd8) throw new MalformedImageError("JPEG 文件头无效");
  const walk: JpegWalk = { pieces: [src.subarray(start, start + 2)], end: src.length, facts: { orientation: 1 }, gainMapPieces: [], hasHdrgmXmp: false };
  let sawExif = false;
  let pos = start + 2;
  while (pos < src.length) {
    // Tolerate stray bytes and fill bytes before a marker, as decoders do.
    while (pos < src.length && src[pos] !== 0xff) pos++;
    while (pos + 1 < src.length && src[pos + 1] === 0xff) pos++;
    if (pos + 1 >= src.length) break;
    const marker = src[pos + 1];
    if (marker === 0xd9) {
      // EOI. Anything after it is not this image's: the caller keeps a gain map it can find.
      walk.pieces.push(src.subarray(pos, pos + 2));
      walk.end = pos + 2;
      break;
    }
    if (marker === 0x01 || (marker >= 0xd0 && marker <= 0xd7)) {
      walk.pieces.push(src.subarray(pos, pos + 2)); // markers without a length field
      pos += 2;
      continue;
    }
    if (marker === 0xd8 || marker === 0x00 || pos + 4 > src.length) throw new MalformedImageError("JPEG 标记无效");
    const end = pos + 2 + src.readUInt16BE(pos + 2);
    if (end > src.length || end < pos + 4) throw new MalformedImageError("JPEG 段长度无效");
    const payload = src.subarray(pos + 4, end);
    if ((marker >= 0xe0 && marker <= 0xef) || marker === 0xfe) {
      if (marker === 0xe1 && !sawExif && payload.subarray(0, 6).equals(EXIF_PREFIX)) {
        sawExif = true;
        walk.facts = exifFacts(payload);
      }
      keepAppSegment(walk, marker, payload, src.subarray(pos, end), primary ? pos + 4 + MPF_ID.length : -1);
      pos = end;
      continue;
    }
    if (marker === 0xda) {
      // SOS header, then entropy-coded data up to the next real marker.
      const dataEnd = endOfEntropyData(src, end);
      walk.pieces.push(src.subarray(pos, dataEnd));
      pos = dataEnd;
      continue;
    }
    walk.pieces.push(src.subarray(pos, end));
    pos = end;
  }
  // A primary image that never reaches its EOI is cut off (an upload broken off mid-way): every
  // render of it failed, so it is refused rather than stored as it is.
  if (primary && walk.end === src.length && !(src.length >= 2 && src[src.length - 2] === 0xff && src[src.length - 1] === 0xd9)) {
    throw new MalformedImageError("JPEG 数据不完整（缺少结束标记 EOI）");
  }
  return walk;
}

/** Adds what is kept of one APPn/COM segment to `walk`; `mpfTiffAt` is -1 outside the primary. */
function keepAppSegment(walk: JpegWalk, marker: number, payload: Buffer, whole: Buffer, mpfTiffAt: number) {
  if (marker === 0xe0 && startsWith(payload, "JFIF\0")) {
    // A JFIF thumbnail could show an uncropped original: keep the header, drop the thumbnail.
    if (payload.length <= 14 || (payload[12] === 0 && payload[13] === 0)) walk.pieces.push(whole);
    else {
      const header = Buffer.from(payload.subarray(0, 14));
      header[12] = header[13] = 0;
      walk.pieces.push(segment(0xe0, header));
    }
  } else if (marker === 0xe2 && startsWith(payload, "ICC_PROFILE\0")) walk.pieces.push(whole);
  else if (marker === 0xee && startsWith(payload, "Adobe")) walk.pieces.push(whole);
  else if (marker === 0xe2 && startsWith(payload, ISO_GAIN_MAP_ID)) {
    walk.gainMapPieces.push(walk.pieces.length);
    walk.pieces.push(whole);
  } else if (marker === 0xe1 && startsWith(payload, XMP_ID)) {
    const reduced = walk.hasHdrgmXmp ? undefined : hdrgmXmp(payload);
    if (reduced) {
      walk.hasHdrgmXmp = true;
      walk.gainMapPieces.push(walk.pieces.length);
      walk.pieces.push(segment(0xe1, reduced));
    }
  } else if (marker === 0xe2 && mpfTiffAt >= 0 && !walk.mpf && startsWith(payload, MPF_ID)) {
    const images = readMpf(payload);
    if (images) {
      walk.mpf = { index: walk.pieces.length, images, tiffAt: mpfTiffAt };
      walk.pieces.push(whole); // replaced by a rebuilt index, or removed, once the layout is known
    }
  }
}

/** In entropy-coded data 0xFF is followed by 0x00 (stuffing) or RSTn; anything else is a marker. */
function endOfEntropyData(src: Buffer, from: number): number {
  for (let i = src.indexOf(0xff, from); i !== -1 && i + 1 < src.length; i = src.indexOf(0xff, i + 1)) {
    const next = src[i + 1];
    if (next === 0x00 || (next >= 0xd0 && next <= 0xd7) || next === 0xff) continue;
    return i;
  }
  return src.length; // truncated file without EOI: keep what there is
}

/** A gain-map image found through the MPF index, stripped. */
interface GainMapImage {
  attributes: number;
  pieces: Buffer[];
}

/**
 * The gain-map images the primary's MPF index points to, each stripped of its own metadata.
 * An image is kept only when it lies after the primary, inside the file, starts with SOI, ends
 * within the size the index gives it, walks cleanly and carries gain-map metadata itself; any
 * other image the index lists (a camera's preview, a stereo view) is dropped with everything
 * else after the primary's EOI, as before.
 */
function gainMapImages(src: Buffer, primary: JpegWalk, mpf: NonNullable<JpegWalk["mpf"]>): GainMapImage[] {
  if (mpf.images[0].offset !== 0) return [];
  const found: GainMapImage[] = [];
  let after = primary.end;
  // Entries with offset 0 (inside the primary) or size 0 (no room for an image) fall to the
  // checks below like any other misplaced entry.
  const candidates = mpf.images
    .slice(1)
    .map((image) => ({ image, at: mpf.tiffAt + image.offset }))
    .sort((a, b) => a.at - b.at);
  for (const { image, at } of candidates) {
    if (at < after || at + image.size > src.length) continue;
    let walk: JpegWalk;
    try {
      walk = walkJpeg(src, at, false);
    } catch (err) {
      if (err instanceof MalformedImageError) continue;
      throw err;
    }
    if (walk.end > at + image.size || walk.gainMapPieces.length === 0) continue;
    found.push({ attributes: image.attributes, pieces: walk.pieces });
    after = walk.end;
  }
  return found;
}

const byteLength = (pieces: Buffer[]) => pieces.reduce((n, p) => n + p.length, 0);

export function stripJpeg(src: Buffer, reuseSource: boolean): StrippedImage {
  const primary = walkJpeg(src, 0, true);
  const pieces = primary.pieces;
  const gainMaps = primary.mpf && primary.gainMapPieces.length ? gainMapImages(src, primary, primary.mpf) : [];
  const drop = new Set<number>();
  if (gainMaps.length === 0) {
    // No gain map to keep: its description and the index would only point at nothing.
    for (const i of primary.gainMapPieces) drop.add(i);
    if (primary.mpf) drop.add(primary.mpf.index);
  }
  let mpfPiece = -1;
  const kept: Buffer[] = [];
  pieces.forEach((piece, i) => {
    if (drop.has(i)) return;
    if (i === primary.mpf?.index) {
      mpfPiece = kept.length;
      kept.push(Buffer.alloc(mpfSegmentLength(1 + gainMaps.length))); // the rebuilt index, filled in below
    } else kept.push(piece);
  });
  if (exifWorthKeeping(primary.facts)) {
    // Right after SOI and a leading JFIF APP0, where readers look for EXIF.
    let at = 1;
    while (at < kept.length && kept[at][1] === 0xe0) at++;
    kept.splice(at, 0, segment(0xe1, minimalExif(primary.facts, true)));
    if (mpfPiece >= at) mpfPiece++;
  }
  if (mpfPiece >= 0) {
    // MPF offsets count from the index's own TIFF header (after FF E2, the length and "MPF\0").
    const tiffAt = byteLength(kept.slice(0, mpfPiece)) + 4 + MPF_ID.length;
    const primaryLength = byteLength(kept);
    const images: MpfImage[] = [{ attributes: primary.mpf!.images[0].attributes, size: primaryLength, offset: 0 }];
    let at = primaryLength;
    for (const gainMap of gainMaps) {
      const size = byteLength(gainMap.pieces);
      images.push({ attributes: gainMap.attributes, size, offset: at - tiffAt });
      at += size;
    }
    const rebuilt = mpfSegment(images);
    // The same bytes as the original segment: keep the source's piece, so an untouched file stays the source itself.
    const original = pieces[primary.mpf!.index];
    kept[mpfPiece] = rebuilt.equals(original) ? original : rebuilt;
    for (const gainMap of gainMaps) kept.push(...gainMap.pieces);
  }
  return { bytes: joined(src, kept, reuseSource), orientation: primary.facts.orientation };
}
