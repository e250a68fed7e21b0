// Builds AVIF files box by box around the AV1 payload of a sharp-made AVIF, so tests choose the
// structure sharp cannot write: nclx colour, HDR light levels (clli/mdcv), irot/imir, EXIF and XMP
// items stored in mdat or idat, and the box versions and field widths other writers use. Written
// apart from src/images/exif-avif.ts on purpose: a test built with the code under test proves little.
import sharp from "sharp";

export interface Av1Image {
  /** The whole av1C property box. */
  av1C: Buffer;
  payload: Buffer;
  width: number;
  height: number;
  depth: number;
}

interface RawBox {
  type: string;
  body: number;
  end: number;
}

function boxes(b: Buffer, start: number, end: number): RawBox[] {
  const out: RawBox[] = [];
  for (let p = start; p + 8 <= end; ) {
    let size = b.readUInt32BE(p);
    let body = p + 8;
    if (size === 1) {
      size = Number(b.readBigUInt64BE(p + 8)); // largesize
      body = p + 16;
    } else if (size === 0) size = end - p; // to the end
    if (size < body - p) break;
    out.push({ type: b.toString("latin1", p + 4, p + 8), body, end: p + size });
    p += size;
  }
  return out;
}
const child = (b: Buffer, parent: RawBox, type: string, skip = 0) => boxes(b, parent.body + skip, parent.end).find((c) => c.type === type)!;

/** A picture with distinct pixels everywhere, encoded by sharp; its AV1 payload and configuration. */
export async function av1Image(width = 24, height = 16, depth: 8 | 10 | 12 = 8): Promise<Av1Image> {
  const px = Buffer.alloc(width * height * 3);
  for (let i = 0; i < width * height; i++) px.set([((i % width) * 11) & 255, (Math.floor(i / width) * 15) & 255, (i * 7) & 255], i * 3);
  const avif = await sharp(px, { raw: { width, height, channels: 3 } })
    .avif({ quality: 80, bitdepth: depth })
    .toBuffer();
  const meta = boxes(avif, 0, avif.length).find((b) => b.type === "meta")!;
  const ipco = child(avif, child(avif, meta, "iprp", 4), "ipco");
  const av1C = child(avif, ipco, "av1C");
  // sharp writes iloc version 0 with 4-byte offset, length and base offset fields: one item, one extent.
  const iloc = child(avif, meta, "iloc", 4);
  if (avif.readUInt16BE(iloc.body + 4) !== 0x4440 || avif.readUInt16BE(iloc.body + 6) !== 1) throw new Error("unexpected iloc from sharp");
  const base = avif.readUInt32BE(iloc.body + 12);
  const offset = base + avif.readUInt32BE(iloc.body + 18);
  const length = avif.readUInt32BE(iloc.body + 22);
  return { av1C: avif.subarray(av1C.body - 8, av1C.end), payload: avif.subarray(offset, offset + length), width, height, depth };
}

export interface AvifSpec {
  image: Av1Image;
  /** EXIF as sharp's metadata() gives it ("Exif\0\0" + TIFF). */
  exif?: Buffer;
  xmp?: string;
  /** Where the EXIF/XMP items' bytes are: mdat (default) or idat (construction method 1). */
  metadataIn?: "mdat" | "idat";
  /** Their bytes before the picture's in mdat. */
  metadataFirst?: boolean;
  ilocVersion?: 0 | 1 | 2;
  offsetSize?: 4 | 8;
  /** Offsets as a base offset (the mdat data's start) plus extent offsets. */
  baseOffset?: boolean;
  iinfVersion?: 0 | 1;
  /** 3 writes 32-bit item ids everywhere (pitm, iref, ipma version 1). */
  infeVersion?: 2 | 3;
  /** ipma with 15-bit property indexes. */
  ipmaWide?: boolean;
  /** An ipma entry for the EXIF item too. */
  metadataProperty?: boolean;
  nclx?: [primaries: number, transfer: number, matrix: number, fullRange: boolean];
  clli?: [maxCll: number, maxPall: number];
  mdcv?: boolean;
  irot?: number;
  imir?: 0 | 1;
  /** A top-level free box of this many bytes between meta and mdat. */
  freeAfterMeta?: number;
  /** mdat with a 64-bit size. */
  largeMdat?: boolean;
}

/** Big-endian fields of 8, 16 and 32 bits, one per argument (the box builders here and in unit/exif-avif-rules). */
export const u8 = (...v: number[]) => Buffer.from(v);
export const u16 = (...v: number[]) => Buffer.concat(v.map((n) => Buffer.from([n >> 8, n & 255])));
export const u32 = (...v: number[]) =>
  Buffer.concat(
    v.map((n) => {
      const b = Buffer.alloc(4);
      b.writeUInt32BE(n);
      return b;
    }),
  );
const uN = (n: number, bytes: number) => (bytes === 8 ? Buffer.concat([u32(0), u32(n)]) : bytes === 4 ? u32(n) : Buffer.alloc(0));
const mk = (type: string, ...content: Buffer[]) => {
  const body = Buffer.concat(content);
  return Buffer.concat([u32(8 + body.length), Buffer.from(type, "latin1"), body]);
};
const full = (type: string, version: number, flags: number, ...content: Buffer[]) =>
  mk(type, u8(version, flags >> 16, (flags >> 8) & 255, flags & 255), ...content);
const cstr = (s: string) => Buffer.from(`${s}\0`, "utf8");

/** An AVIF with exactly the structure `spec` describes. */
export function buildAvif(spec: AvifSpec): Buffer {
  const ilocVersion = spec.metadataIn === "idat" ? Math.max(1, spec.ilocVersion ?? 1) : (spec.ilocVersion ?? 0);
  const offsetSize = spec.offsetSize ?? 4;
  const wideIds = spec.infeVersion === 3;
  const id = (n: number) => (wideIds ? u32(n) : u16(n));
  const exifData = spec.exif && Buffer.concat([u32(spec.exif.subarray(0, 4).toString("latin1") === "Exif" ? 6 : 0), spec.exif]);
  const xmpData = spec.xmp !== undefined ? Buffer.from(spec.xmp, "utf8") : undefined;
  const metadata = [exifData && { id: 2, data: exifData }, xmpData && { id: 3, data: xmpData }].filter((m) => m !== undefined);
  const inIdat = spec.metadataIn === "idat";

  // The mdat's data, and where each item's bytes start in it (or in idat).
  const inMdat = [{ id: 1, data: spec.image.payload }, ...(inIdat ? [] : metadata)];
  if (spec.metadataFirst) inMdat.reverse();
  const where = new Map<number, { at: number; length: number; method: number }>();
  let at = 0;
  for (const item of inMdat) {
    where.set(item.id, { at, length: item.data.length, method: 0 });
    at += item.data.length;
  }
  const mdatData = Buffer.concat(inMdat.map((i) => i.data));
  at = 0;
  for (const item of inIdat ? metadata : []) {
    where.set(item.id, { at, length: item.data.length, method: 1 });
    at += item.data.length;
  }
  const idatData = Buffer.concat(inIdat ? metadata.map((m) => m.data) : []);

  const properties: [box: Buffer, essential: boolean][] = [
    [full("ispe", 0, 0, u32(spec.image.width, spec.image.height)), false],
    [full("pixi", 0, 0, u8(3, spec.image.depth, spec.image.depth, spec.image.depth)), false],
    [spec.image.av1C, true],
  ];
  if (spec.nclx) {
    const [p, t, m, fullRange] = spec.nclx;
    properties.push([mk("colr", Buffer.from("nclx"), u16(p, t, m), u8(fullRange ? 0x80 : 0)), false]);
  }
  if (spec.clli) properties.push([mk("clli", u16(...spec.clli)), false]);
  if (spec.mdcv) properties.push([mk("mdcv", u16(35400, 14600, 8500, 39850, 6550, 2300, 15635, 16450), u32(10_000_000, 1)), false]);
  if (spec.irot !== undefined) properties.push([mk("irot", u8(spec.irot & 3)), true]);
  if (spec.imir !== undefined) properties.push([mk("imir", u8(spec.imir)), true]);
  const association = (index: number, essential: boolean) => (spec.ipmaWide ? u16((essential ? 0x8000 : 0) | index) : u8((essential ? 0x80 : 0) | index));
  const ipmaEntries = [Buffer.concat([id(1), u8(properties.length), ...properties.map(([, essential], i) => association(i + 1, essential))])];
  if (spec.metadataProperty && exifData) ipmaEntries.push(Buffer.concat([id(2), u8(1), association(1, false)]));
  const iprp = mk(
    "iprp",
    mk("ipco", ...properties.map(([box]) => box)),
    full("ipma", wideIds ? 1 : 0, spec.ipmaWide ? 1 : 0, u32(ipmaEntries.length), ...ipmaEntries),
  );

  const infeVersion = spec.infeVersion ?? 2;
  const infe = (item: number, type: string, extra: Buffer[] = []) =>
    full("infe", infeVersion, item === 1 ? 0 : 1, id(item), u16(0), Buffer.from(type, "latin1"), cstr(""), ...extra);
  const infes = [infe(1, "av01"), exifData && infe(2, "Exif"), xmpData && infe(3, "mime", [cstr("application/rdf+xml")])].filter((b) => b !== undefined);
  const iinf = full("iinf", spec.iinfVersion ?? 0, 0, (spec.iinfVersion ?? 0) === 0 ? u16(infes.length) : u32(infes.length), ...infes);
  const refs = metadata.map((m) => mk("cdsc", id(m.id), u16(1), id(1)));
  const iref = refs.length ? full("iref", wideIds ? 1 : 0, 0, ...refs) : Buffer.alloc(0);
  const hdlr = full("hdlr", 0, 0, u32(0), Buffer.from("pict"), u32(0, 0, 0), cstr(""));
  const pitm = full("pitm", wideIds ? 1 : 0, 0, id(1));
  const idat = inIdat && metadata.length ? mk("idat", idatData) : Buffer.alloc(0);
  const ftyp = mk("ftyp", Buffer.from("avif"), u32(0), Buffer.from("mif1avifmiaf"));

  const meta = (mdatDataStart: number) => {
    const baseSize = spec.baseOffset ? offsetSize : 0;
    const entries = [...where.entries()]
      .sort(([a], [b]) => a - b)
      .map(([item, loc]) => {
        const base = loc.method === 0 && spec.baseOffset ? mdatDataStart : 0;
        const offset = loc.method === 0 && !spec.baseOffset ? mdatDataStart + loc.at : loc.at;
        return Buffer.concat([
          ilocVersion < 2 ? u16(item) : u32(item),
          ilocVersion >= 1 ? u16(loc.method) : Buffer.alloc(0),
          u16(0),
          uN(base, baseSize),
          u16(1),
          uN(offset, offsetSize),
          u32(loc.length),
        ]);
      });
    const iloc = full(
      "iloc",
      ilocVersion,
      0,
      u8((offsetSize << 4) | 4, baseSize << 4),
      ilocVersion < 2 ? u16(entries.length) : u32(entries.length),
      ...entries,
    );
    return full("meta", 0, 0, hdlr, pitm, iloc, iinf, iref, iprp, idat);
  };
  const free = spec.freeAfterMeta ? mk("free", Buffer.alloc(spec.freeAfterMeta - 8)) : Buffer.alloc(0);
  const mdatHeader = spec.largeMdat
    ? Buffer.concat([u32(1), Buffer.from("mdat"), uN(16 + mdatData.length, 8)])
    : Buffer.concat([u32(8 + mdatData.length), Buffer.from("mdat")]);
  const dataStart = ftyp.length + meta(0).length + free.length + mdatHeader.length;
  return Buffer.concat([ftyp, meta(dataStart), free, mdatHeader, mdatData]);
}

/** The bytes of the first box of `type` anywhere in `b`'s meta/iprp/ipco tree (whole box, header included). */
export function findBox(b: Buffer, type: string): Buffer | undefined {
  const containers: Record<string, number> = { meta: 4, iprp: 0, ipco: 0, iinf: -1, iref: 4 };
  const walk = (start: number, end: number): Buffer | undefined => {
    for (const box of boxes(b, start, end)) {
      if (box.type === type) return b.subarray(box.body - 8, box.end);
      const skip = containers[box.type];
      if (skip === undefined) continue;
      const from = skip >= 0 ? box.body + skip : box.body + 4 + (b[box.body] === 0 ? 2 : 4);
      const found = walk(from, box.end);
      if (found) return found;
    }
    return undefined;
  };
  return walk(0, b.length);
}
