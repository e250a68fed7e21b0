/**
 * The content sniffer's byte rules on synthetic heads (src/images/sniff.ts): exact signatures and
 * their lengths, WebP's RIFF container and first chunk, the AVIF `ftyp` box (its size, the major
 * brand, HEIF's HEVC brands winning, compatible brands only inside the box), image sequences, and
 * the APNG walk to `acTL` before `IDAT`. Real encoders' files are in sniff.test.ts.
 */
import { describe, expect, test } from "bun:test";
import { APNG_MIME, isAnimatedPng, isAvifSequence, sniffImageType } from "../../src/images/sniff";

const bytes = (...parts: (string | number[] | Uint8Array)[]) =>
  new Uint8Array(Buffer.concat(parts.map((p) => (typeof p === "string" ? Buffer.from(p, "latin1") : Buffer.from(p)))));
const u32 = (n: number) => [(n >>> 24) & 0xff, (n >>> 16) & 0xff, (n >>> 8) & 0xff, n & 0xff];
/** An ftyp box declaring `size`, then whatever follows it in the file. */
const ftyp = (size: number, major: string, compatible: string[] = [], after = "") => bytes(u32(size), "ftyp", major, [0, 0, 0, 0], compatible.join(""), after);
const mime = (head: Uint8Array) => sniffImageType(head)?.mime ?? null;
const PNG_SIGNATURE = [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a];
const chunk = (type: string, length = 0) => bytes(u32(length), type, new Uint8Array(length), [0, 0, 0, 0]);

describe("signatures", () => {
  test("JPEG, PNG and GIF need their whole signature", () => {
    expect(mime(bytes([0xff, 0xd8, 0xff]))).toBe("image/jpeg");
    expect(mime(bytes([0xff, 0xd8]))).toBeNull();
    expect(mime(bytes(PNG_SIGNATURE))).toBe("image/png");
    expect(mime(bytes(PNG_SIGNATURE.slice(0, 7)))).toBeNull();
    expect(mime(bytes(PNG_SIGNATURE.slice(0, 7), [0x0b]))).toBeNull();
    expect(mime(bytes("GIF89"))).toBeNull();
    expect(mime(bytes("GIF88a"))).toBeNull();
  });

  test("WebP is a RIFF container labelled WEBP whose first chunk is VP8, VP8L or VP8X", () => {
    for (const first of ["VP8 ", "VP8L", "VP8X"]) expect(mime(bytes("RIFF", u32(4), "WEBP", first))).toBe("image/webp");
    expect(mime(bytes("RIFX", u32(4), "WEBP", "VP8 "))).toBeNull();
    expect(mime(bytes("RIFF", u32(4), "WAVE", "VP8 "))).toBeNull();
    expect(mime(bytes("RIFF", u32(4), "WEBP", "VP8Z"))).toBeNull();
    expect(mime(bytes("RIFF", u32(4), "WEBP"))).toBeNull();
  });
});

describe("AVIF by its ftyp box", () => {
  test("the major brand avif or avis decides, in a box of at least its 16 fixed bytes", () => {
    expect(mime(ftyp(16, "avif"))).toBe("image/avif");
    expect(mime(ftyp(16, "avis"))).toBe("image/avif");
    expect(mime(ftyp(15, "avif"))).toBeNull();
    expect(mime(ftyp(16, "avif").subarray(0, 15))).toBeNull();
    expect(mime(bytes(u32(16), "ftyq", "avif", [0, 0, 0, 0]))).toBeNull();
  });

  test("a compatible avif brand counts only inside the box, up to its last four bytes", () => {
    expect(mime(ftyp(24, "mif1", ["miaf", "avif"]))).toBe("image/avif");
    expect(mime(ftyp(20, "mif1", ["miaf", "avif"]))).toBeNull();
    expect(mime(ftyp(20, "mif1", ["miaf"], "avif"))).toBeNull();
    expect(mime(ftyp(28, "mif1", ["miaf", "MA1B", "avis"]))).toBe("image/avif");
    expect(mime(ftyp(24, "mif1", ["miaf", "heic"]))).toBeNull();
  });

  test("HEIF's HEVC major brands win over a compatible avif brand: browsers cannot show those", () => {
    for (const major of ["heic", "heix", "heim", "heis", "hevc", "hevx", "hevm", "hevs"]) {
      expect([major, mime(ftyp(24, major, ["mif1", "avif"]))]).toEqual([major, null]);
    }
  });

  test("an image sequence is an ftyp box with the major brand avis", () => {
    expect(isAvifSequence(ftyp(16, "avis").subarray(0, 12))).toBe(true);
    expect(isAvifSequence(ftyp(16, "avis").subarray(0, 11))).toBe(false);
    expect(isAvifSequence(ftyp(16, "avif"))).toBe(false);
    expect(isAvifSequence(ftyp(24, "mif1", ["avis"]))).toBe(false);
    expect(isAvifSequence(bytes(u32(16), "ftyX", "avis"))).toBe(false);
  });
});

describe("animated PNG", () => {
  test("acTL before the first IDAT is animated; IDAT or IEND first, a head cut short, or no PNG is still", () => {
    const ihdr = chunk("IHDR", 13);
    expect(isAnimatedPng(bytes(PNG_SIGNATURE, ihdr, chunk("acTL", 8), chunk("IDAT", 4)))).toBe(true);
    expect(isAnimatedPng(bytes(PNG_SIGNATURE, ihdr, chunk("IDAT", 4), chunk("acTL", 8)))).toBe(false);
    expect(isAnimatedPng(bytes(PNG_SIGNATURE, ihdr, chunk("IEND"), chunk("acTL", 8)))).toBe(false);
    // The chunk header alone (length and type) is enough to see acTL.
    expect(isAnimatedPng(bytes(PNG_SIGNATURE, ihdr, u32(8), "acTL"))).toBe(true);
    expect(isAnimatedPng(bytes(PNG_SIGNATURE, ihdr, u32(8), "acT"))).toBe(false);
    // A long chunk before acTL is skipped by its length, not searched.
    expect(isAnimatedPng(bytes(PNG_SIGNATURE, ihdr, chunk("iCCP", 40), chunk("acTL", 8)))).toBe(true);
    expect(isAnimatedPng(bytes(PNG_SIGNATURE, ihdr, u32(40), "tEXt", "acTL", new Uint8Array(36), [0, 0, 0, 0], chunk("IDAT")))).toBe(false);
    expect(isAnimatedPng(bytes([0xff, 0xd8, 0xff], chunk("acTL", 8)))).toBe(false);
    expect(APNG_MIME).toBe("image/apng");
  });
});
