// The lossless metadata strip (src/images/exif.ts) walks an upload's container before sharp has
// read its header: under exif_policy=strip it is the first parser to see hostile bytes. Whatever
// it gets, it must answer with stripped bytes or MalformedImageError (which sends the upload to
// the checked re-encode path) in bounded time, and a refusal must leave the bytes it was handed
// untouched, since that path reads them again.
import { beforeAll, describe, expect, test } from "bun:test";
import fc from "fast-check";
import sharp from "sharp";
import { MalformedImageError, stripMetadataBytes } from "../../src/images/exif";
import { av1Image, buildAvif } from "../helpers/avif";
import { ultraHdr } from "../helpers/gainmap";
import { SECRET_XMP, secretExif } from "../helpers/metadata";
import { fuzzParams, PARSER_BLOCK_MS, timedCall } from "./fuzz-support";

const MIMES = ["image/jpeg", "image/png", "image/webp", "image/gif", "image/avif"] as const;
/** Real files of each type; the first is the one the intact-file check below reads. */
const seeds = new Map<string, Buffer[]>();

beforeAll(async () => {
  const base = sharp({ create: { width: 24, height: 16, channels: 3, background: "#3a6" } }).withExif({ IFD0: { Make: "KuraCam" } });
  const exif = await secretExif();
  const image = await av1Image(24, 16, 10);
  seeds.set("image/jpeg", [await base.clone().jpeg().toBuffer(), await ultraHdr(true)]); // the second with a gain map and an MPF index
  seeds.set("image/png", [await base.clone().png().toBuffer()]);
  seeds.set("image/webp", [await base.clone().webp().toBuffer()]);
  seeds.set("image/gif", [await base.clone().gif().toBuffer()]);
  seeds.set("image/avif", [
    await base.clone().avif().toBuffer(),
    buildAvif({ image, exif, xmp: SECRET_XMP, nclx: [9, 16, 9, true], clli: [1000, 400], irot: 1, metadataProperty: true }),
    buildAvif({ image, exif, xmp: SECRET_XMP, metadataIn: "idat", ilocVersion: 2, infeVersion: 3, iinfVersion: 1, offsetSize: 8, baseOffset: true }),
  ]);
});

/** A real file of `mime` with a few bytes overwritten, a cut, or junk appended. */
const damaged = (mime: string) =>
  fc
    .record({
      seed: fc.nat(),
      edits: fc.array(fc.tuple(fc.nat(), fc.integer({ min: 0, max: 255 })), { maxLength: 6 }),
      cut: fc.option(fc.nat()),
      tail: fc.uint8Array({ maxLength: 64 }),
    })
    .map(({ seed: pick, edits, cut, tail }) => {
      const all = seeds.get(mime)!;
      const seed = all[pick % all.length];
      const bytes = Buffer.from(seed);
      for (const [at, value] of edits) bytes[at % bytes.length] = value;
      const kept = cut === null ? bytes : bytes.subarray(0, cut % (bytes.length + 1));
      return Buffer.concat([kept, tail]);
    });

/** The format's signature followed by anything. */
const signed = (mime: string) => fc.uint8Array({ maxLength: 600 }).map((rest) => Buffer.concat([seeds.get(mime)![0].subarray(0, 12), rest]));

function checkOne(input: Buffer, mime: string) {
  const original = Buffer.from(input);
  const { value, error, ms } = timedCall(() => stripMetadataBytes(input, mime, true));
  expect(ms).toBeLessThan(PARSER_BLOCK_MS);
  if (error !== undefined) {
    expect(error).toBeInstanceOf(MalformedImageError);
    expect(input.equals(original)).toBe(true);
    return;
  }
  // A minimal EXIF (orientation, R03) or a rebuilt MPF index or hdrgm XMP may add a little; an AVIF edit keeps the size.
  if (mime === "image/avif") expect(value!.bytes.length).toBe(original.length);
  else expect(value!.bytes.length).toBeLessThanOrEqual(original.length + 64);
  expect(value!.orientation).toBeGreaterThanOrEqual(1);
  expect(value!.orientation).toBeLessThanOrEqual(8);
}

describe("lossless metadata strip on hostile bytes", () => {
  for (const mime of MIMES) {
    test(`${mime}: stripped bytes or MalformedImageError, in bounded time, the input untouched on refusal`, () => {
      fc.assert(
        fc.property(
          fc.oneof(
            damaged(mime),
            signed(mime),
            fc.uint8Array({ maxLength: 300 }).map((b) => Buffer.from(b)),
          ),
          (input) => checkOne(input, mime),
        ),
        fuzzParams(5),
      );
    });
  }

  test("an intact file is stripped of its EXIF and still decodes to the same size", async () => {
    for (const mime of MIMES) {
      const { bytes } = stripMetadataBytes(Buffer.from(seeds.get(mime)![0]), mime);
      expect(bytes.includes("KuraCam")).toBe(false);
      const meta = await sharp(bytes).metadata();
      expect([meta.width, meta.height]).toEqual([24, 16]);
    }
  });
});
