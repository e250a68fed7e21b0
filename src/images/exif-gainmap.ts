// The parts of an HDR gain-map JPEG (Ultra HDR, ISO 21496-1, Adobe's gain map) that a metadata
// strip keeps, because without them an HDR display shows only the SDR base picture:
//  - the APP2 "urn:iso:std:iso:ts:21496:-1" segments (a version in the primary, the gain map's
//    parameters in the gain-map image: numbers only);
//  - the APP2 "MPF" index, which tells readers where the gain-map JPEG after the primary's EOI
//    starts. It holds byte offsets, so it is rebuilt from scratch for the stripped layout;
//  - an XMP packet reduced to the `hdrgm:` properties (Google's Ultra HDR and Adobe's format), each
//    checked against a whitelist of names and numeric values, so no other namespace (creator,
//    location, edit history) and no free text can ride along.
// exif-jpeg.ts decides which segments these are and puts the file back together.

import { tiffReaders } from "./exif-parts";

export const ISO_GAIN_MAP_ID = "urn:iso:std:iso:ts:21496:-1\0";
export const MPF_ID = "MPF\0";
export const XMP_ID = "http://ns.adobe.com/xap/1.0/\0";

const HDRGM_NS = "http://ns.adobe.com/hdr-gain-map/1.0/";
const NUMBER = /^[-+]?(?:\d{1,20}(?:\.\d{0,20})?|\.\d{1,20})(?:[eE][-+]?\d{1,3})?$/;
/** Adobe's gain-map properties and the values each may take; anything else in the packet is dropped. */
const HDRGM_FIELDS: Record<string, RegExp> = {
  Version: /^\d{1,3}(?:\.\d{1,3}){0,2}$/,
  BaseRenditionIsHDR: /^(?:True|False)$/,
  GainMapMin: NUMBER,
  GainMapMax: NUMBER,
  Gamma: NUMBER,
  OffsetSDR: NUMBER,
  OffsetHDR: NUMBER,
  HDRCapacityMin: NUMBER,
  HDRCapacityMax: NUMBER,
};
/** Properties that may hold one value per colour channel, as an rdf:Seq. */
const PER_CHANNEL = new Set(["GainMapMin", "GainMapMax", "Gamma", "OffsetSDR", "OffsetHDR"]);

/**
 * The hdrgm properties of an XMP APP1 payload ("http://ns.adobe.com/xap/1.0/\0" + packet) as a
 * new packet holding nothing else; undefined when the packet has no valid hdrgm:Version (then
 * it is not a gain-map description and is dropped whole). Linear in the packet's size: the
 * patterns only start at "hdrgm:" and their repeats are bounded.
 */
export function hdrgmXmp(payload: Buffer): Buffer | undefined {
  const text = payload.toString("latin1", XMP_ID.length);
  if (!/xmlns:hdrgm\s{0,16}=\s{0,16}["']http:\/\/ns\.adobe\.com\/hdr-gain-map\/1\.0\/["']/.test(text)) return undefined;
  const found = new Map<string, string[]>();
  const take = (name: string, values: string[]) => {
    const pattern = HDRGM_FIELDS[name];
    if (found.has(name) || !pattern || values.length === 0 || !values.every((v) => pattern.test(v))) return;
    if (values.length === 1 || (values.length === 3 && PER_CHANNEL.has(name))) found.set(name, values);
  };
  // Attribute form: hdrgm:GainMapMax="2.3" on the rdf:Description.
  for (const m of text.matchAll(/\bhdrgm:([A-Za-z]{1,32})\s{0,16}=\s{0,16}(?:"([^"<]{0,64})"|'([^'<]{0,64})')/g)) take(m[1], [(m[2] ?? m[3]).trim()]);
  // Element form: <hdrgm:Gamma>1</hdrgm:Gamma>, or one value per channel in an rdf:Seq.
  for (const m of text.matchAll(/<hdrgm:([A-Za-z]{1,32})>([\s\S]{0,512}?)<\/hdrgm:\1>/g)) {
    const inner = m[2].trim();
    if (!inner.includes("<")) take(m[1], [inner]);
    else if (/^<rdf:Seq>(?:\s*<rdf:li>[^<]{0,64}<\/rdf:li>){1,3}\s*<\/rdf:Seq>$/.test(inner)) {
      take(
        m[1],
        [...inner.matchAll(/<rdf:li>([^<]{0,64})<\/rdf:li>/g)].map((li) => li[1].trim()),
      );
    }
  }
  if (!found.has("Version")) return undefined;
  const attributes: string[] = [];
  const elements: string[] = [];
  for (const [name, values] of found) {
    if (values.length === 1) attributes.push(` hdrgm:${name}="${values[0]}"`);
    else elements.push(`<hdrgm:${name}><rdf:Seq>${values.map((v) => `<rdf:li>${v}</rdf:li>`).join("")}</rdf:Seq></hdrgm:${name}>`);
  }
  const description = `<rdf:Description rdf:about="" xmlns:hdrgm="${HDRGM_NS}"${attributes.join("")}${elements.length ? `>${elements.join("")}</rdf:Description>` : "/>"}`;
  const packet = `<x:xmpmeta xmlns:x="adobe:ns:meta/"><rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#">${description}</rdf:RDF></x:xmpmeta>`;
  return Buffer.from(XMP_ID + packet, "latin1");
}

/** One image of an MPF index: attribute word (flags, format, type), size and offset. */
export interface MpfImage {
  attributes: number;
  size: number;
  /** From the start of the MPF segment's TIFF header; 0 for the first (primary) image. */
  offset: number;
}

const MPF_VERSION_TAG = 0xb000;
const MPF_COUNT_TAG = 0xb001;
const MPF_ENTRY_TAG = 0xb002;
/** More images than any gain-map file has; a larger index is not followed. */
const MPF_MAX_IMAGES = 16;

/** The image list of an MPF APP2 payload ("MPF\0" + TIFF structure); undefined when it is not a valid index. */
export function readMpf(payload: Buffer): MpfImage[] | undefined {
  const tiff = payload.subarray(MPF_ID.length);
  const readers = tiffReaders(tiff);
  if (!readers) return undefined;
  const { u16, u32 } = readers;
  const ifd = u32(4);
  if (ifd < 8 || ifd + 2 > tiff.length) return undefined;
  let count: number | undefined;
  let list: { at: number; n: number } | undefined;
  for (let i = 0; i < u16(ifd); i++) {
    const entry = ifd + 2 + i * 12;
    if (entry + 12 > tiff.length) return undefined;
    const tag = u16(entry);
    if (tag === MPF_COUNT_TAG && u16(entry + 2) === 4 && u32(entry + 4) === 1) count = u32(entry + 8);
    if (tag === MPF_ENTRY_TAG && u16(entry + 2) === 7) {
      const bytes = u32(entry + 4);
      if (bytes % 16 !== 0) return undefined;
      list = { at: u32(entry + 8), n: bytes / 16 };
    }
  }
  if (!list || list.n < 1 || list.n > MPF_MAX_IMAGES || (count !== undefined && count !== list.n)) return undefined;
  if (list.at < 8 || list.at + list.n * 16 > tiff.length) return undefined;
  const images: MpfImage[] = [];
  for (let i = 0; i < list.n; i++) {
    const at = list.at + i * 16;
    images.push({ attributes: u32(at), size: u32(at + 4), offset: u32(at + 8) });
  }
  return images;
}

/** Bytes of the APP2 segment `mpfSegment` writes for `n` images. */
export const mpfSegmentLength = (n: number) => 4 + MPF_ID.length + 50 + 16 * n;

/**
 * A fresh MPF APP2 segment (marker included) listing `images`: version, count and the image list,
 * big-endian, the layout libultrahdr writes. Nothing of the original index is copied but each
 * image's attribute word; its unique-ID list and attribute IFD (serial-number-like identifiers)
 * are left out, and dependent-image links are cleared since images may have been dropped.
 */
export function mpfSegment(images: MpfImage[]): Buffer {
  const seg = Buffer.alloc(mpfSegmentLength(images.length));
  seg.writeUInt16BE(0xffe2, 0);
  seg.writeUInt16BE(seg.length - 2, 2);
  seg.write(MPF_ID, 4, "latin1");
  const t = 4 + MPF_ID.length; // the TIFF header: offsets below are from here
  seg.write("MM\0*", t, "latin1");
  seg.writeUInt32BE(8, t + 4);
  seg.writeUInt16BE(3, t + 8);
  const entry = (i: number, tag: number, type: number, count: number) => {
    const at = t + 10 + i * 12;
    seg.writeUInt16BE(tag, at);
    seg.writeUInt16BE(type, at + 2);
    seg.writeUInt32BE(count, at + 4);
    return at + 8;
  };
  seg.write("0100", entry(0, MPF_VERSION_TAG, 7, 4), "latin1");
  seg.writeUInt32BE(images.length, entry(1, MPF_COUNT_TAG, 4, 1));
  seg.writeUInt32BE(50, entry(2, MPF_ENTRY_TAG, 7, 16 * images.length));
  // t + 46: offset of the next IFD, 0 (none); the image list starts at t + 50.
  images.forEach((image, i) => {
    const at = t + 50 + i * 16;
    seg.writeUInt32BE(image.attributes >>> 0, at);
    seg.writeUInt32BE(image.size, at + 4);
    seg.writeUInt32BE(image.offset, at + 8);
  });
  return seg;
}
