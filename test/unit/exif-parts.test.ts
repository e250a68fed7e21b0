// The format-independent parts of the strip (images/exif-parts.ts): which EXIF facts a stripped
// file keeps, read from blocks exiftool wrote (both byte orders) and from damaged copies of them;
// the minimal block written back, read by exiftool; and how kept pieces are put back together.
import { describe, expect, test } from "bun:test";
import sharp from "sharp";
import { EXIF_PREFIX, exifFacts, joined, minimalExif } from "../../src/images/exif-parts";
import { exiftool, exiftoolWrite } from "../helpers/metadata";

const ORIENTATION_TAG = 0x0112;
const EXIF_IFD_TAG = 0x8769;

let plainJpeg: Buffer | undefined;
async function jpeg(): Promise<Buffer> {
  plainJpeg ??= await sharp({ create: { width: 8, height: 8, channels: 3, background: "#369" } })
    .jpeg()
    .toBuffer();
  return plainJpeg;
}

/** The EXIF payload ("Exif\0\0" + TIFF) of a JPEG exiftool wrote `args` into. */
async function exifBlock(args: string[]): Promise<Buffer> {
  const exif = (await sharp(await exiftoolWrite(await jpeg(), args)).metadata()).exif;
  if (!exif) throw new Error(`exiftool wrote no EXIF for ${args.join(" ")}`);
  return exif;
}

/** Offset (in the TIFF after the prefix) of the IFD entry for `tag`, found by its bytes (tag, type SHORT or LONG). */
function entryOffset(tiff: Buffer, tag: number): number {
  const le = tiff.toString("latin1", 0, 2) === "II";
  for (let at = 8; at + 12 <= tiff.length; at += 2) {
    const t = le ? tiff.readUInt16LE(at) : tiff.readUInt16BE(at);
    const type = le ? tiff.readUInt16LE(at + 2) : tiff.readUInt16BE(at + 2);
    const count = le ? tiff.readUInt32LE(at + 4) : tiff.readUInt32BE(at + 4);
    if (t === tag && (type === 3 || type === 4) && count === 1) return at;
  }
  throw new Error(`tag ${tag.toString(16)} not found`);
}

/** The block with the entry at `at` rewritten to `type` and `value` (a SHORT in its first two bytes, else 32 bits). */
function patchEntry(block: Buffer, at: number, type: number, value: number): Buffer {
  const out = Buffer.from(block);
  const tiff = out.subarray(6);
  const le = tiff.toString("latin1", 0, 2) === "II";
  const w16 = (o: number, v: number) => (le ? tiff.writeUInt16LE(v, o) : tiff.writeUInt16BE(v, o));
  const w32 = (o: number, v: number) => (le ? tiff.writeUInt32LE(v, o) : tiff.writeUInt32BE(v, o));
  w16(at + 2, type);
  w32(at + 8, 0);
  if (type === 3) w16(at + 8, value);
  else w32(at + 8, value);
  return out;
}

describe("EXIF facts of blocks exiftool wrote", () => {
  for (const order of ["II", "MM"] as const) {
    test(`${order}: every orientation 1..8 is read; R03 keeps its ColorSpace or null; R98 is not Adobe RGB`, async () => {
      for (let o = 1; o <= 8; o++) {
        expect(exifFacts(await exifBlock([`-ExifByteOrder=${order}`, `-Orientation#=${o}`, "-Make=KuraCam"]))).toEqual({ orientation: o });
      }
      const r03 = await exifBlock([`-ExifByteOrder=${order}`, "-Orientation#=6", "-InteropIndex=R03", "-ColorSpace#=65535"]);
      expect(exifFacts(r03)).toEqual({ orientation: 6, adobeRgb: { colorSpace: 65535 } });
      expect(exifFacts(r03.subarray(6))).toEqual(exifFacts(r03)); // the TIFF alone, without "Exif\0\0"
      expect(exifFacts(await exifBlock([`-ExifByteOrder=${order}`, "-InteropIndex=R03", "-ColorSpace=", "-Make=KuraCam"]))).toEqual({
        orientation: 1,
        adobeRgb: { colorSpace: null },
      });
      expect(exifFacts(await exifBlock([`-ExifByteOrder=${order}`, "-InteropIndex=R98", "-ColorSpace#=1"]))).toEqual({ orientation: 1 });
    });
  }

  test("an orientation stored as LONG is read; 0 and 9 (out of range) count as 1", async () => {
    const block = await exifBlock(["-ExifByteOrder=II", "-Orientation#=6", "-Make=KuraCam"]);
    const at = entryOffset(block.subarray(6), ORIENTATION_TAG);
    expect(exifFacts(patchEntry(block, at, 4, 8)).orientation).toBe(8);
    expect(exifFacts(patchEntry(block, at, 3, 0)).orientation).toBe(1);
    expect(exifFacts(patchEntry(block, at, 3, 9)).orientation).toBe(1);
    expect(exifFacts(patchEntry(block, at, 3, 1)).orientation).toBe(1);
    expect(exifFacts(patchEntry(block, at, 3, 8)).orientation).toBe(8);
    // A type with no number (ASCII) is not an orientation.
    expect(exifFacts(patchEntry(block, at, 2, 6)).orientation).toBe(1);
  });

  test("an Exif IFD pointer of type IFD (13) leads to the R03 marking like a LONG one", async () => {
    const block = await exifBlock(["-ExifByteOrder=MM", "-InteropIndex=R03", "-ColorSpace#=65535"]);
    const tiff = block.subarray(6);
    const at = entryOffset(tiff, EXIF_IFD_TAG);
    const pointer = tiff.readUInt32BE(at + 8);
    expect(exifFacts(patchEntry(block, at, 13, pointer)).adobeRgb).toEqual({ colorSpace: 65535 });
    expect(exifFacts(patchEntry(block, at, 2, pointer)).adobeRgb).toBeUndefined();
  });

  test("the first of two orientation entries counts", () => {
    // MM, IFD0 at 8 with two Orientation entries: 3, then 6.
    const tiff = Buffer.alloc(8 + 2 + 24 + 4);
    tiff.write("MM", 0, "latin1");
    tiff.writeUInt16BE(42, 2);
    tiff.writeUInt32BE(8, 4);
    tiff.writeUInt16BE(2, 8);
    for (const [i, value] of [3, 6].entries()) {
      const at = 10 + 12 * i;
      tiff.writeUInt16BE(ORIENTATION_TAG, at);
      tiff.writeUInt16BE(3, at + 2);
      tiff.writeUInt32BE(1, at + 4);
      tiff.writeUInt16BE(value, at + 8);
    }
    expect(exifFacts(tiff).orientation).toBe(3);
  });

  test("a cut block never throws, and finds the orientation exactly when its whole entry is there", async () => {
    for (const order of ["II", "MM"]) {
      const block = await exifBlock([`-ExifByteOrder=${order}`, "-Orientation#=7", "-InteropIndex=R03", "-ColorSpace=", "-Make=KuraCam"]);
      const tiff = block.subarray(6);
      const entryEnd = entryOffset(tiff, ORIENTATION_TAG) + 12;
      for (let length = 0; length <= tiff.length; length++) {
        const cut = Buffer.from(tiff.subarray(0, length)); // a copy: reads past its end must fail, not see the rest
        const facts = exifFacts(cut);
        expect({ length, orientation: facts.orientation }).toEqual({ length, orientation: length >= entryEnd ? 7 : 1 });
      }
      expect(exifFacts(block).adobeRgb).toEqual({ colorSpace: null });
    }
  });

  test("a damaged header or IFD offset gives no facts and does not throw", async () => {
    const block = await exifBlock(["-ExifByteOrder=II", "-Orientation#=6", "-Make=KuraCam"]);
    const damaged = (edit: (tiff: Buffer) => void) => {
      const copy = Buffer.from(block.subarray(6));
      edit(copy);
      return exifFacts(copy);
    };
    expect(damaged(() => {}).orientation).toBe(6);
    expect(damaged((t) => t.write("XX", 0, "latin1")).orientation).toBe(1); // byte order
    expect(damaged((t) => t.writeUInt16LE(43, 2)).orientation).toBe(1); // not TIFF's 42
    expect(damaged((t) => t.writeUInt32LE(4, 4)).orientation).toBe(1); // IFD0 inside the header
    expect(damaged((t) => t.writeUInt32LE(t.length - 1, 4)).orientation).toBe(1); // no room for the count
    expect(damaged((t) => t.writeUInt32LE(0xffffffff, 4)).orientation).toBe(1);
    // A count far larger than the entries present: those present are still read.
    expect(damaged((t) => t.writeUInt16LE(0xffff, t.readUInt32LE(4))).orientation).toBe(6);
    expect(exifFacts(Buffer.from("II*\0"))).toEqual({ orientation: 1 });
    expect(exifFacts(Buffer.alloc(0))).toEqual({ orientation: 1 });
  });
});

describe("the minimal EXIF block a strip writes back", () => {
  const cases = [
    { orientation: 6 },
    { orientation: 1, adobeRgb: { colorSpace: 65535 } },
    { orientation: 8, adobeRgb: { colorSpace: null } },
    { orientation: 3, adobeRgb: { colorSpace: 2 } },
  ];
  for (const facts of cases) {
    test(`${JSON.stringify(facts)} reads back the same, by our reader and by exiftool, with nothing else in it`, async () => {
      const tiff = minimalExif(facts, false);
      expect(tiff.toString("latin1", 0, 2)).toBe("MM");
      expect(exifFacts(tiff)).toEqual(facts);
      const withPrefix = minimalExif(facts, true);
      expect(withPrefix.subarray(0, 6).equals(EXIF_PREFIX)).toBe(true);
      expect(withPrefix.subarray(6).equals(tiff)).toBe(true);
      const tags = await exiftool(tiff);
      const kept = Object.entries(tags)
        .filter(([key]) => /^(IFD0|ExifIFD|InteropIFD):/.test(key))
        .map(([key, value]) => `${key}=${value}`)
        .sort();
      const expected = [
        ...(facts.orientation !== 1 ? [`IFD0:Orientation=${exiftoolOrientation(facts.orientation)}`] : []),
        ...(facts.adobeRgb?.colorSpace != null ? [`ExifIFD:ColorSpace=${exiftoolColorSpace(facts.adobeRgb.colorSpace)}`] : []),
        ...(facts.adobeRgb ? ["InteropIFD:InteropIndex=R03 - DCF option file (Adobe RGB)"] : []),
      ].sort();
      expect(kept).toEqual(expected);
    });
  }
});

function exiftoolOrientation(o: number): string {
  return [
    "",
    "Horizontal (normal)",
    "Mirror horizontal",
    "Rotate 180",
    "Mirror vertical",
    "Mirror horizontal and rotate 270 CW",
    "Rotate 90 CW",
    "Mirror horizontal and rotate 90 CW",
    "Rotate 270 CW",
  ][o]!;
}

function exiftoolColorSpace(c: number): string {
  return ({ 1: "sRGB", 2: "Adobe RGB", 65535: "Uncalibrated" } as Record<number, string>)[c]!;
}

describe("kept pieces put back together", () => {
  const source = () => Buffer.from(Array.from({ length: 64 }, (_, i) => i));

  test("all of the source, in order: the source itself, no copy", () => {
    const src = source();
    expect(joined(src, [src.subarray(0, 10), src.subarray(10, 64)], false)).toBe(src);
    expect(joined(src, [src], true)).toBe(src);
  });

  test("pieces with gaps: the same bytes as a concatenation, moved inside the source only when it is given up", () => {
    const src = source();
    const kept = [src.subarray(0, 4), src.subarray(10, 20), src.subarray(40, 64)];
    const expected = Buffer.concat(kept);
    const copied = joined(src, kept, false);
    expect(copied.equals(expected)).toBe(true);
    expect(copied.buffer).not.toBe(src.buffer);
    expect(src.equals(source())).toBe(true); // not given up: untouched
    const moved = joined(src, kept, true);
    expect(moved.equals(expected)).toBe(true);
    expect(moved.buffer).toBe(src.buffer);
    expect(moved.byteOffset).toBe(src.byteOffset);
  });

  test("the source's tail dropped: a shorter result, not the source", () => {
    const src = source();
    const out = joined(src, [src.subarray(0, 60)], true);
    expect(out.length).toBe(60);
    expect(out.equals(source().subarray(0, 60))).toBe(true);
  });

  test("a piece that is not the source's own (another buffer, or beyond its range in a shared pool) is copied, and the source left as it was", () => {
    const pool = Buffer.from(Array.from({ length: 128 }, (_, i) => 255 - i));
    const src = pool.subarray(32, 96); // a source living inside a larger ArrayBuffer, as pooled Buffers do
    const before = Buffer.from(src);
    const outside = [src.subarray(0, 8), pool.subarray(100, 110)]; // same ArrayBuffer, past the source's end
    const out = joined(src, outside, true);
    expect(out.equals(Buffer.concat(outside))).toBe(true);
    expect(src.equals(before)).toBe(true);
    const before2 = [pool.subarray(0, 8), src.subarray(8, 16)]; // same ArrayBuffer, before the source's start
    expect(joined(src, before2, true).equals(Buffer.concat(before2))).toBe(true);
    expect(src.equals(before)).toBe(true);
    const foreign = [src.subarray(0, 8), Buffer.from("EXIF-bytes"), src.subarray(20, 30)];
    expect(joined(src, foreign, true).equals(Buffer.concat(foreign))).toBe(true);
    expect(src.equals(before)).toBe(true);
    // Pieces out of order: never moved in place (a later piece could be overwritten first).
    const reversed = [src.subarray(30, 40), src.subarray(0, 10)];
    expect(joined(src, reversed, true).equals(Buffer.concat(reversed))).toBe(true);
    expect(src.equals(before)).toBe(true);
  });
});
