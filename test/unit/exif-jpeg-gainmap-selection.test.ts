/**
 * Which images an MPF index lists are kept as gain maps by the JPEG strip (exif-jpeg.ts,
 * gainMapImages), rule by rule on synthetic files: the primary must be the index's first entry at
 * offset 0; the other entries are taken in file order, each only when it starts after the primary
 * (and after the gain map kept before it), lies inside the file, starts with SOI, walks cleanly,
 * ends within the size the index gives it and carries gain-map metadata itself. The index is
 * rebuilt for what is kept; when nothing is, the index and the primary's gain-map XMP go too.
 * Real Ultra HDR files are judged in exif-gainmap.test.ts.
 */
import { describe, expect, test } from "bun:test";
import { stripJpeg } from "../../src/images/exif-jpeg";
import { type MpfImage, mpfSegment, mpfSegmentLength, readMpf } from "../../src/images/exif-gainmap";
import { minimalExif } from "../../src/images/exif-parts";

const SOI = Buffer.from([0xff, 0xd8]);
const EOI = Buffer.from([0xff, 0xd9]);
const seg = (marker: number, payload: Buffer) => {
  const head = Buffer.from([0xff, marker, 0, 0]);
  head.writeUInt16BE(payload.length + 2, 2);
  return Buffer.concat([head, payload]);
};
const jpeg = (...parts: Buffer[]) => Buffer.concat(parts);

const SOF = seg(0xc0, Buffer.from([8, 0, 1, 0, 1, 1, 1, 0x11, 0]));
const SCAN = jpeg(seg(0xda, Buffer.from([1, 1, 0, 0, 63, 0])), Buffer.from([0x12, 0xff, 0x00, 0x34]));
/** Image data whose quantisation table is filled with `tag`: tells the images apart in the output. */
const imageData = (tag: number) => jpeg(seg(0xdb, Buffer.alloc(65, tag)), SOF, SCAN);
const HDRGM = seg(
  0xe1,
  Buffer.from(
    'http://ns.adobe.com/xap/1.0/\0<x:xmpmeta><rdf:RDF><rdf:Description xmlns:hdrgm="http://ns.adobe.com/hdr-gain-map/1.0/" hdrgm:Version="1.0" hdrgm:GainMapMax="2.5"/></rdf:RDF></x:xmpmeta>',
    "latin1",
  ),
);
const PRIMARY_TAG = 1;
/** A gain-map image: its own hdrgm XMP, then image data. */
const gainMap = (tag: number, after = Buffer.alloc(0)) => jpeg(SOI, HDRGM, imageData(tag), EOI, after);
/** Another image (a camera's preview): no gain-map metadata. */
const preview = (tag: number) => jpeg(SOI, imageData(tag), EOI);
const PRIMARY_ATTRIBUTES = 0x20030000;

/** Where the MPF index's TIFF header starts in every file hdrJpeg makes: after SOI, the hdrgm XMP, FF E2, the length and "MPF\0". */
const TIFF_AT = SOI.length + HDRGM.length + 4 + 4;

/**
 * A primary (`beforeMpf`: its hdrgm XMP unless told otherwise; the MPF index; `inPrimary`
 * segments; image data) followed by `images`, each after `gap` junk bytes; the index lists them
 * where they are, unless `edit` changes it (same number of entries).
 */
function hdrJpeg(
  images: { bytes: Buffer; gap?: number }[],
  edit?: (index: MpfImage[]) => void,
  inPrimary: Buffer = Buffer.alloc(0),
  beforeMpf: Buffer[] = [HDRGM],
): Buffer {
  const head = jpeg(SOI, ...beforeMpf);
  const tiffAt = head.length + 4 + 4;
  const primaryLength = head.length + mpfSegmentLength(1 + images.length) + inPrimary.length + imageData(PRIMARY_TAG).length + EOI.length;
  const index: MpfImage[] = [{ attributes: PRIMARY_ATTRIBUTES, size: primaryLength, offset: 0 }];
  const tail: Buffer[] = [];
  let at = primaryLength;
  images.forEach(({ bytes, gap = 0 }, i) => {
    tail.push(Buffer.alloc(gap, 0x55), bytes);
    at += gap;
    index.push({ attributes: 0x000000 + i + 1, size: bytes.length, offset: at - tiffAt });
    at += bytes.length;
  });
  edit?.(index);
  return jpeg(head, mpfSegment(index), inPrimary, imageData(PRIMARY_TAG), EOI, ...tail);
}

const tagOf = (image: Buffer) => image[image.indexOf(Buffer.from([0xff, 0xdb])) + 4];

/**
 * What the stripped file holds: the primary's tag, and for each image its rebuilt index lists (in
 * order) its tag and attributes, each checked to be a whole JPEG (SOI to EOI) that carries its
 * own hdrgm XMP and ends where the next begins. Undefined index: the file has none left.
 */
function kept(src: Buffer): { primary: number; gainMaps?: { tag: number; attributes: number }[]; hdrgmInPrimary: boolean } {
  const out = stripJpeg(src, false).bytes;
  const mpfAt = out.indexOf(Buffer.from("MPF\0", "latin1"));
  const firstEoi = out.indexOf(EOI);
  const primaryPart = out.subarray(0, firstEoi + 2);
  const hdrgmInPrimary = primaryPart.includes(Buffer.from("hdrgm:Version", "latin1"));
  if (mpfAt < 0) {
    // No index: the primary alone, nothing after its EOI.
    expect(out.length).toBe(firstEoi + 2);
    return { primary: tagOf(primaryPart)!, hdrgmInPrimary };
  }
  const images = readMpf(out.subarray(mpfAt, mpfAt - 2 + out.readUInt16BE(mpfAt - 2)))!;
  const tiffAt = mpfAt + 4;
  expect(images[0]).toEqual({ attributes: PRIMARY_ATTRIBUTES, size: primaryPart.length, offset: 0 });
  let next = primaryPart.length;
  const gainMaps = images.slice(1).map((image) => {
    expect(tiffAt + image.offset).toBe(next);
    const bytes = out.subarray(next, next + image.size);
    next += image.size;
    expect([bytes.subarray(0, 2), bytes.subarray(-2), bytes.indexOf(EOI)]).toEqual([SOI, EOI, bytes.length - 2]);
    expect(bytes.includes(Buffer.from("hdrgm:Version", "latin1"))).toBe(true);
    return { tag: tagOf(bytes)!, attributes: image.attributes };
  });
  expect(next).toBe(out.length);
  return { primary: tagOf(primaryPart)!, gainMaps, hdrgmInPrimary };
}
const onlyPrimary = { primary: PRIMARY_TAG, hdrgmInPrimary: false };

describe("the gain maps an MPF index points to", () => {
  test("a gain map right after the primary is kept, with its attributes, under a rebuilt index", () => {
    expect(kept(hdrJpeg([{ bytes: gainMap(7) }]))).toEqual({ primary: PRIMARY_TAG, gainMaps: [{ tag: 7, attributes: 1 }], hdrgmInPrimary: true });
    // Junk between the primary and the gain map, and after the gain map's EOI, is not kept.
    expect(kept(hdrJpeg([{ bytes: gainMap(7, Buffer.alloc(9, 0x66)), gap: 5 }]))).toEqual({
      primary: PRIMARY_TAG,
      gainMaps: [{ tag: 7, attributes: 1 }],
      hdrgmInPrimary: true,
    });
  });

  test("an index whose first entry is not the primary at offset 0 keeps nothing: the index and the primary's hdrgm XMP go", () => {
    expect(kept(hdrJpeg([{ bytes: gainMap(7) }], (index) => (index[0]!.offset = 4)))).toEqual(onlyPrimary);
  });

  test("no image in the index with gain-map metadata keeps nothing", () => {
    expect(kept(hdrJpeg([{ bytes: preview(5) }]))).toEqual(onlyPrimary);
  });

  test("a preview before the gain map is dropped; the index then lists the primary and the gain map", () => {
    expect(kept(hdrJpeg([{ bytes: preview(5) }, { bytes: gainMap(7) }])).gainMaps).toEqual([{ tag: 7, attributes: 2 }]);
  });

  test("entries are taken in file order whatever the index's order; each kept gain map follows the one before", () => {
    const swapped = hdrJpeg([{ bytes: gainMap(7) }, { bytes: gainMap(8) }], (index) => index.splice(1, 2, index[2]!, index[1]!));
    expect(kept(swapped).gainMaps).toEqual([
      { tag: 7, attributes: 1 },
      { tag: 8, attributes: 2 },
    ]);
  });

  test("entries with offset 0 or size 0 beside the primary are ignored", () => {
    expect(kept(hdrJpeg([{ bytes: gainMap(7) }, { bytes: gainMap(8) }], (index) => (index[1]!.offset = 0))).gainMaps).toEqual([{ tag: 8, attributes: 2 }]);
    expect(kept(hdrJpeg([{ bytes: gainMap(7) }, { bytes: gainMap(8) }], (index) => (index[2]!.size = 0))).gainMaps).toEqual([{ tag: 7, attributes: 1 }]);
  });

  test("an entry pointing inside the primary, or at the gain map already kept, is not a second image", () => {
    // Into the primary: a comment there holds what would walk as a gain map.
    const hidden = seg(0xfe, gainMap(9));
    // It starts 4 bytes (FF FE and the length) after the MPF segment, which starts 8 bytes before TIFF_AT.
    const hiddenAt = TIFF_AT - 8 + mpfSegmentLength(2) + 4;
    expect(hdrJpeg([{ bytes: gainMap(7) }], undefined, hidden).subarray(hiddenAt, hiddenAt + 2)).toEqual(SOI);
    const intoPrimary = hdrJpeg([{ bytes: gainMap(7) }], (index) => (index[1]!.offset = hiddenAt - TIFF_AT), hidden);
    expect(kept(intoPrimary)).toEqual(onlyPrimary);
    const twice = hdrJpeg([{ bytes: gainMap(7) }, { bytes: gainMap(8) }], (index) => (index[2]!.offset = index[1]!.offset));
    expect(kept(twice).gainMaps).toEqual([{ tag: 7, attributes: 1 }]);
  });

  test("an entry must lie inside the file and hold the whole image: past the end or too short, it is dropped; a longer size is fine", () => {
    const pastEnd = hdrJpeg([{ bytes: gainMap(7) }], (index) => (index[1]!.size += 1));
    expect(kept(pastEnd)).toEqual(onlyPrimary);
    const exact = gainMap(7);
    const tooShort = hdrJpeg([{ bytes: exact }], (index) => (index[1]!.size -= 1));
    expect(kept(tooShort)).toEqual(onlyPrimary);
    const roomy = hdrJpeg([{ bytes: gainMap(7, Buffer.alloc(20, 0x66)) }], (index) => (index[1]!.size -= 10));
    expect(kept(roomy).gainMaps).toEqual([{ tag: 7, attributes: 1 }]);
  });

  test("an entry pointing at junk, or at an image that does not walk, is skipped and the next one still kept", () => {
    const junk = hdrJpeg([{ bytes: gainMap(7), gap: 8 }, { bytes: gainMap(8) }], (index) => (index[1]!.offset -= 8));
    expect(kept(junk).gainMaps).toEqual([{ tag: 8, attributes: 2 }]);
    // A segment length running past the image: refused by the walk.
    const broken = jpeg(SOI, Buffer.from([0xff, 0xe1, 0x7f, 0xff]), imageData(6), EOI);
    expect(kept(hdrJpeg([{ bytes: broken }, { bytes: gainMap(8) }])).gainMaps).toEqual([{ tag: 8, attributes: 2 }]);
  });
});

describe("the gain-map segments each image keeps", () => {
  const count = (out: Buffer, text: string) => out.toString("latin1").split(text).length - 1;
  const strip = (src: Buffer) => stripJpeg(src, false).bytes;
  /** An hdrgm XMP packet in `marker` whose GainMapMax tells it apart. */
  const hdrgm = (max: string, marker = 0xe1) =>
    seg(
      marker,
      Buffer.from(
        `http://ns.adobe.com/xap/1.0/\0<x:xmpmeta><rdf:RDF><rdf:Description xmlns:hdrgm="http://ns.adobe.com/hdr-gain-map/1.0/" hdrgm:Version="1.0" hdrgm:GainMapMax="${max}"/></rdf:RDF></x:xmpmeta>`,
        "latin1",
      ),
    );
  const iso = (marker: number) => seg(marker, Buffer.from("urn:iso:std:iso:ts:21496:-1\0\x00\x01gain", "latin1"));

  test("a gain map's own MPF index goes, and so does a second index in the primary", () => {
    const ownIndex = mpfSegment([{ attributes: 0, size: 10, offset: 0 }]);
    const withIndex = jpeg(SOI, HDRGM, ownIndex, imageData(7), EOI);
    const out = strip(hdrJpeg([{ bytes: withIndex }]));
    expect(kept(hdrJpeg([{ bytes: withIndex }])).gainMaps).toEqual([{ tag: 7, attributes: 1 }]);
    expect(count(out, "MPF\0")).toBe(1);
    const withSecond = hdrJpeg([{ bytes: gainMap(7) }], undefined, mpfSegment([{ attributes: 9, size: 99, offset: 0 }]));
    expect(kept(withSecond).gainMaps).toEqual([{ tag: 7, attributes: 1 }]);
    const second = strip(withSecond);
    expect(count(second, "MPF\0")).toBe(1);
    expect(second.includes(mpfSegment([{ attributes: 9, size: 99, offset: 0 }]))).toBe(false);
  });

  test("a primary without gain-map metadata keeps no gain map; gain-map metadata without an index goes", () => {
    expect(kept(hdrJpeg([{ bytes: gainMap(7) }], undefined, undefined, []))).toEqual(onlyPrimary);
    expect(strip(jpeg(SOI, HDRGM, iso(0xe2), imageData(PRIMARY_TAG), EOI))).toEqual(jpeg(SOI, imageData(PRIMARY_TAG), EOI));
  });

  test("an MPF index counts in APP2 only: the same bytes in APP3 are dropped, and no gain map is found through them", () => {
    const src = hdrJpeg([{ bytes: gainMap(7) }]);
    const mpfAt = src.indexOf(Buffer.from("MPF\0", "latin1")) - 4;
    const inApp3 = Buffer.from(src);
    inApp3[mpfAt + 1] = 0xe3;
    expect(kept(inApp3)).toEqual(onlyPrimary);
  });

  test("an MPF index that cannot be read keeps nothing (and is no crash)", () => {
    const unreadable = seg(0xe2, Buffer.from(`MPF\0${"x".repeat(24)}`, "latin1"));
    expect(kept(jpeg(SOI, HDRGM, unreadable, imageData(PRIMARY_TAG), EOI, gainMap(7)))).toEqual(onlyPrimary);
  });

  test("only an image's first hdrgm XMP is kept, and only from APP1; ISO gain-map segments count in APP2 only", () => {
    const out = strip(hdrJpeg([{ bytes: gainMap(7) }], undefined, jpeg(iso(0xe2), iso(0xe3)), [hdrgm("9.5", 0xe2), HDRGM, hdrgm("7.5")]));
    const primary = out.subarray(0, out.indexOf(EOI) + 2).toString("latin1");
    expect([primary.includes('GainMapMax="2.5"'), primary.includes("9.5"), primary.includes("7.5")]).toEqual([true, false, false]);
    expect(count(out.subarray(0, out.indexOf(EOI) + 2), "urn:iso:std:iso:ts:21496:-1")).toBe(1);
    expect(out.includes(iso(0xe2))).toBe(true);
    expect(out.includes(iso(0xe3))).toBe(false);
  });

  test("the minimal EXIF goes right after SOI, before an index that was there, whose offsets follow", () => {
    const exif6 = seg(0xe1, minimalExif({ orientation: 6 }, true));
    const src = hdrJpeg([{ bytes: gainMap(7) }], undefined, jpeg(HDRGM, exif6), []);
    const out = stripJpeg(src, false);
    expect(out.orientation).toBe(6);
    expect(out.bytes.subarray(2, 2 + exif6.length)).toEqual(exif6);
    expect(kept(src)).toEqual({ primary: PRIMARY_TAG, gainMaps: [{ tag: 7, attributes: 1 }], hdrgmInPrimary: true });
  });
});
