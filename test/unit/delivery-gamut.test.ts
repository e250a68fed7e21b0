/**
 * Wide-gamut sources keep their gamut in variants (image-fidelity audit MED-2): a Display P3 or Adobe RGB
 * source renders in Display P3 with the profile embedded; sRGB, untagged and CMYK sources stay sRGB without
 * one. The ICC `desc` reader is fuzzed: any bytes give a string or undefined, never an exception.
 */
import { describe, expect, test } from "bun:test";
import fc from "fast-check";
import sharp from "sharp";
import { iccDescription, isWideRgbProfile } from "../../src/delivery/icc";
import { renderVariant } from "../../src/delivery/transform";
import { fuzzParams } from "../fuzz/fuzz-support";

const base = { quality: { webp: 80, jpeg: 82 }, webpMethod: 4 } as const;
const photo = () => sharp({ create: { width: 64, height: 48, channels: 3, background: { r: 20, g: 200, b: 40 } } });
const profileOf = async (bytes: Buffer) => {
  const { icc } = await sharp(bytes).metadata();
  return icc ? iccDescription(icc) : undefined;
};

describe("variants of wide-gamut sources", () => {
  test("a Display P3 source: every variant format but GIF carries Display P3, and the colours stay (no clip, no wash-out)", async () => {
    const p3 = await photo().withIccProfile("p3").jpeg({ quality: 95 }).toBuffer();
    expect(await profileOf(p3)).toMatch(/P3/);
    for (const format of ["webp", "jpeg", "png", "avif"] as const) {
      const out = await renderVariant(p3, { ...base, width: 32, format });
      expect([format, await profileOf(out)]).toEqual([format, expect.stringMatching(/P3/)]);
      // Both read back into sRGB by their own profiles: the same colour.
      const [a, b] = await Promise.all([p3, out].map((x) => sharp(x).resize(1, 1).raw().toBuffer()));
      for (let c = 0; c < 3; c++) expect(Math.abs(a![c]! - b![c]!)).toBeLessThan(8);
    }
    expect(await profileOf(await renderVariant(p3, { ...base, width: 32, format: "gif" }))).toBeUndefined();
  });

  test("sRGB-tagged, untagged and CMYK sources render in sRGB without a profile", async () => {
    const sources = [
      await photo().withIccProfile("srgb").jpeg().toBuffer(),
      await photo().jpeg().toBuffer(),
      await photo().toColourspace("cmyk").jpeg().toBuffer(),
    ];
    for (const source of sources) expect(await profileOf(await renderVariant(source, { ...base, width: 32, format: "webp" }))).toBeUndefined();
  });
});

describe("ICC description", () => {
  test("reads v2 desc and v4 mluc descriptions; only RGB profiles other than sRGB count as wide", async () => {
    const iccOf = async (name: string) => (await sharp(await photo().withIccProfile(name).png().toBuffer()).metadata()).icc!;
    const [p3, srgb, cmyk] = await Promise.all([iccOf("p3"), iccOf("srgb"), sharp(await photo().toColourspace("cmyk").jpeg().toBuffer()).metadata()]);
    expect([iccDescription(p3), isWideRgbProfile(p3)]).toEqual([expect.stringMatching(/P3/), true]);
    expect([iccDescription(srgb), isWideRgbProfile(srgb)]).toEqual([expect.stringMatching(/sRGB/i), false]);
    expect(isWideRgbProfile(cmyk.icc)).toBe(false);
    expect(isWideRgbProfile(undefined)).toBe(false);
    // ICC v2 (what cameras and older tools write): a `desc` tag with an ASCII count and string.
    const v2 = (space: string, text: string) => {
      const tag = Buffer.alloc(12 + text.length + 1);
      tag.write("desc", 0, "ascii");
      tag.writeUInt32BE(text.length + 1, 8);
      tag.write(text, 12, "ascii");
      const header = Buffer.alloc(144);
      header.write(space, 16, "ascii");
      header.writeUInt32BE(1, 128);
      header.write("desc", 132, "ascii");
      header.writeUInt32BE(144, 136);
      header.writeUInt32BE(tag.length, 140);
      return Buffer.concat([header, tag]);
    };
    expect([iccDescription(v2("RGB ", "Adobe RGB (1998)")), isWideRgbProfile(v2("RGB ", "Adobe RGB (1998)"))]).toEqual(["Adobe RGB (1998)", true]);
    expect(isWideRgbProfile(v2("RGB ", "sRGB IEC61966-2.1"))).toBe(false);
    expect(isWideRgbProfile(v2("CMYK", "U.S. Web Coated (SWOP) v2"))).toBe(false);
  });

  test("property: any bytes, or a real profile cut or corrupted anywhere, give a string or undefined", async () => {
    const p3 = (await sharp(await photo().withIccProfile("p3").png().toBuffer()).metadata()).icc!;
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 600 }), (bytes) => {
        expect(["string", "undefined"]).toContain(typeof iccDescription(bytes));
      }),
      fuzzParams(10),
    );
    fc.assert(
      fc.property(fc.nat(p3.length), fc.nat(p3.length - 1), fc.integer({ min: 0, max: 255 }), (cut, at, value) => {
        const bytes = Uint8Array.from(p3);
        bytes[at] = value;
        expect(["string", "undefined"]).toContain(typeof iccDescription(bytes.subarray(0, cut)));
        expect(typeof isWideRgbProfile(bytes)).toBe("boolean");
      }),
      fuzzParams(10),
    );
  });
});
