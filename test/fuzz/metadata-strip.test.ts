// The lossless metadata strip (src/images/exif.ts) walks an upload's container before sharp has
// read its header: under exif_policy=strip it is the first parser to see hostile bytes. Whatever
// it gets, it must answer with stripped bytes or MalformedImageError (which sends the upload to
// the checked re-encode path) in bounded time, and a refusal must leave the bytes it was handed
// untouched, since that path reads them again.
import { beforeAll, describe, expect, test } from "bun:test";
import fc from "fast-check";
import sharp from "sharp";
import { MalformedImageError, stripMetadataBytes } from "../../src/images/exif";
import { fuzzParams, PARSER_BLOCK_MS, timedCall } from "./fuzz-support";

const MIMES = ["image/jpeg", "image/png", "image/webp", "image/gif"] as const;
const seeds = new Map<string, Buffer>();

beforeAll(async () => {
  const base = sharp({ create: { width: 24, height: 16, channels: 3, background: "#3a6" } }).withExif({ IFD0: { Make: "KuraCam" } });
  seeds.set("image/jpeg", await base.clone().jpeg().toBuffer());
  seeds.set("image/png", await base.clone().png().toBuffer());
  seeds.set("image/webp", await base.clone().webp().toBuffer());
  seeds.set("image/gif", await base.clone().gif().toBuffer());
});

/** A real file of `mime` with a few bytes overwritten, a cut, or junk appended. */
const damaged = (mime: string) =>
  fc
    .record({
      edits: fc.array(fc.tuple(fc.nat(), fc.integer({ min: 0, max: 255 })), { maxLength: 6 }),
      cut: fc.option(fc.nat()),
      tail: fc.uint8Array({ maxLength: 64 }),
    })
    .map(({ edits, cut, tail }) => {
      const seed = seeds.get(mime)!;
      const bytes = Buffer.from(seed);
      for (const [at, value] of edits) bytes[at % bytes.length] = value;
      const kept = cut === null ? bytes : bytes.subarray(0, cut % (bytes.length + 1));
      return Buffer.concat([kept, tail]);
    });

/** The format's signature followed by anything. */
const signed = (mime: string) => fc.uint8Array({ maxLength: 600 }).map((rest) => Buffer.concat([seeds.get(mime)!.subarray(0, 12), rest]));

function checkOne(input: Buffer, mime: string) {
  const original = Buffer.from(input);
  const { value, error, ms } = timedCall(() => stripMetadataBytes(input, mime, true));
  expect(ms).toBeLessThan(PARSER_BLOCK_MS);
  if (error !== undefined) {
    expect(error).toBeInstanceOf(MalformedImageError);
    expect(input.equals(original)).toBe(true);
    return;
  }
  expect(value!.bytes.length).toBeLessThanOrEqual(original.length + 64);
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
      const { bytes } = stripMetadataBytes(Buffer.from(seeds.get(mime)!), mime);
      expect(bytes.includes("KuraCam")).toBe(false);
      const meta = await sharp(bytes).metadata();
      expect([meta.width, meta.height]).toEqual([24, 16]);
    }
  });
});
