// HDR gain-map JPEGs for the strip tests: made by sharp 0.35 (libultrahdr: ISO 21496-1 segments and
// an MPF index), then taken apart and reassembled with extra segments in either image, another
// image listed in the MPF index, or junk after the end, under an MPF index this file writes itself
// (little-endian, where libultrahdr and src/images/exif-gainmap.ts write big-endian).
import sharp from "sharp";
import { SECRET_EXIF } from "./metadata";

export const ISO_ID = "urn:iso:std:iso:ts:21496:-1\0";
const EOI_SOI = Buffer.from([0xff, 0xd9, 0xff, 0xd8]);

export function jpegSegment(marker: number, payload: Buffer): Buffer {
  const head = Buffer.from([0xff, marker, 0, 0]);
  head.writeUInt16BE(payload.length + 2, 2);
  return Buffer.concat([head, payload]);
}
export const xmpSegment = (packet: string) => jpegSegment(0xe1, Buffer.from(`http://ns.adobe.com/xap/1.0/\0${packet}`, "utf8"));

/** sharp 0.35's withGainMap() (experimental: its type declarations do not list it yet). */
type Sharp = ReturnType<typeof sharp>;
const withGainMap = (img: Sharp) => (img as Sharp & { withGainMap(): Sharp }).withGainMap();

/** A 64x32 HDR picture (highlights up to 4x SDR white) as an Ultra HDR JPEG; with camera and GPS EXIF when asked. */
export async function ultraHdr(withExif = false): Promise<Buffer> {
  const W = 64;
  const H = 32;
  const px = Buffer.alloc(W * H * 3);
  for (let y = 0; y < H; y++)
    for (let x = 0; x < W; x++) px.set([Math.round((x / (W - 1)) * 255), (y * 8) & 255, 255 - Math.round((x / (W - 1)) * 255)], (y * W + x) * 3);
  let img = withGainMap(sharp(px, { raw: { width: W, height: H, channels: 3 } }).linear(4, 0));
  if (withExif) img = img.withExif(SECRET_EXIF);
  return img.jpeg({ quality: 90 }).toBuffer();
}

/** The segments of one JPEG image from its SOI, each as [marker, whole segment]; SOS and what follows as one piece. */
function segments(jpeg: Buffer): [number, Buffer][] {
  const out: [number, Buffer][] = [];
  let p = 2;
  while (p + 4 <= jpeg.length && jpeg[p + 1] !== 0xda) {
    const end = p + 2 + jpeg.readUInt16BE(p + 2);
    out.push([jpeg[p + 1], jpeg.subarray(p, end)]);
    p = end;
  }
  out.push([0xda, jpeg.subarray(p)]);
  return out;
}

const without = (jpeg: Buffer, drop: (marker: number, seg: Buffer) => boolean) =>
  Buffer.concat([jpeg.subarray(0, 2), ...segments(jpeg).flatMap(([m, s]) => (drop(m, s) ? [] : [s]))]);
const isIso = (m: number, s: Buffer) => m === 0xe2 && s.toString("latin1", 4, 4 + ISO_ID.length) === ISO_ID;
const isMpf = (m: number, s: Buffer) => m === 0xe2 && s.toString("latin1", 4, 8) === "MPF\0";
const insert = (jpeg: Buffer, segs: Buffer[]) => Buffer.concat([jpeg.subarray(0, 2), ...segs, jpeg.subarray(2)]);

/** An MPF APP2 segment (little-endian) listing `entries`: attribute type, size, offset from its TIFF header. */
function mpf(entries: { size: number; offset: number; type: number }[]): Buffer {
  const tiff = Buffer.alloc(8 + 2 + 3 * 12 + 4 + 16 * entries.length);
  tiff.write("II*\0", 0, "latin1");
  tiff.writeUInt32LE(8, 4);
  tiff.writeUInt16LE(3, 8);
  const entry = (i: number, tag: number, type: number, count: number) => {
    const at = 10 + i * 12;
    tiff.writeUInt16LE(tag, at);
    tiff.writeUInt16LE(type, at + 2);
    tiff.writeUInt32LE(count, at + 4);
    return at + 8;
  };
  tiff.write("0100", entry(0, 0xb000, 7, 4), "latin1");
  tiff.writeUInt32LE(entries.length, entry(1, 0xb001, 4, 1));
  tiff.writeUInt32LE(50, entry(2, 0xb002, 7, 16 * entries.length));
  entries.forEach((e, i) => {
    tiff.writeUInt32LE(e.type, 50 + i * 16);
    tiff.writeUInt32LE(e.size, 54 + i * 16);
    tiff.writeUInt32LE(e.offset, 58 + i * 16);
  });
  return jpegSegment(0xe2, Buffer.concat([Buffer.from("MPF\0", "latin1"), tiff]));
}

export interface GainMapLayout {
  /** Segments put right after the primary's SOI (before its MPF index). */
  primary?: Buffer[];
  /** Segments put right after the gain-map image's SOI. */
  secondary?: Buffer[];
  /** Remove the ISO 21496-1 segments (an XMP-only file, Ultra HDR version 1). */
  noIso?: boolean;
  /** Another JPEG listed in the MPF index after the gain map (a camera's preview). */
  extraImage?: Buffer;
  /** Bytes after everything. */
  trailer?: Buffer;
}

/** `made` (an Ultra HDR JPEG from `ultraHdr`) rebuilt with `layout`; its MPF index is rewritten to match. */
export function reassemble(made: Buffer, layout: GainMapLayout): Buffer {
  const split = made.indexOf(EOI_SOI) + 2;
  let primary = without(made.subarray(0, split), (m, s) => isMpf(m, s) || (!!layout.noIso && isIso(m, s)));
  let gainMap = made.subarray(split);
  if (layout.noIso) gainMap = without(gainMap, isIso);
  gainMap = insert(gainMap, layout.secondary ?? []);
  const images = [gainMap, ...(layout.extraImage ? [layout.extraImage] : [])];
  // The index goes right after the inserted segments; its own size is known before its offsets.
  const indexSize = mpf([{ size: 0, offset: 0, type: 0 }, ...images.map(() => ({ size: 0, offset: 0, type: 0 }))]).length;
  const head = Buffer.concat([primary.subarray(0, 2), ...(layout.primary ?? [])]);
  const primaryLength = head.length + indexSize + primary.length - 2;
  const tiffStart = head.length + 8; // after FF E2, the length and "MPF\0"
  let at = primaryLength;
  const entries = [{ size: primaryLength, offset: 0, type: 0x030000 }];
  for (const image of images) {
    entries.push({ size: image.length, offset: at - tiffStart, type: 0 });
    at += image.length;
  }
  const index = mpf(entries);
  primary = Buffer.concat([head, index, primary.subarray(2)]);
  return Buffer.concat([primary, ...images, layout.trailer ?? Buffer.alloc(0)]);
}

/** What an HDR display shows: sharp applies the gain map to the base image (float values above 1 are HDR). */
export const hdrRendition = (jpeg: Buffer) => withGainMap(sharp(jpeg)).raw({ depth: "float" }).toBuffer();

/** The primary image alone (what an SDR-only strip used to keep). */
export const primaryOnly = (jpeg: Buffer) => jpeg.subarray(0, jpeg.indexOf(EOI_SOI) + 2);

/** Google's Ultra HDR XMP: the primary's (version and GContainer directory) and the gain map's parameters. */
export const googlePrimaryXmp = (gainMapLength: number) =>
  `<x:xmpmeta xmlns:x="adobe:ns:meta/" x:xmptk="Adobe XMP Core 5.1.2"><rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#"><rdf:Description xmlns:Container="http://ns.google.com/photos/1.0/container/" xmlns:Item="http://ns.google.com/photos/1.0/container/item/" xmlns:hdrgm="http://ns.adobe.com/hdr-gain-map/1.0/" xmlns:dc="http://purl.org/dc/elements/1.1/" hdrgm:Version="1.0"><dc:creator>KuraSecretXmp</dc:creator><Container:Directory><rdf:Seq><rdf:li rdf:parseType="Resource"><Container:Item Item:Semantic="Primary" Item:Mime="image/jpeg"/></rdf:li><rdf:li rdf:parseType="Resource"><Container:Item Item:Semantic="GainMap" Item:Mime="image/jpeg" Item:Length="${gainMapLength}"/></rdf:li></rdf:Seq></Container:Directory></rdf:Description></rdf:RDF></x:xmpmeta>`;
export const GAIN_MAP_XMP = `<x:xmpmeta xmlns:x="adobe:ns:meta/" x:xmptk="Adobe XMP Core 5.1.2"><rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#"><rdf:Description xmlns:hdrgm="http://ns.adobe.com/hdr-gain-map/1.0/" xmlns:exif="http://ns.adobe.com/exif/1.0/" exif:GPSLatitude="35,40.2N" hdrgm:Version="1.0" hdrgm:GainMapMin="0" hdrgm:GainMapMax="2.5" hdrgm:Gamma="1" hdrgm:OffsetSDR="0.015625" hdrgm:OffsetHDR="0.015625" hdrgm:HDRCapacityMin="0" hdrgm:HDRCapacityMax="2.5" hdrgm:BaseRenditionIsHDR="False"><exif:UserComment>KuraSecretXmp</exif:UserComment></rdf:Description></rdf:RDF></x:xmpmeta>`;
