import { describe, expect, test } from "bun:test";
import sharp from "sharp";
import fc from "fast-check";
import { isAnimatedPng, SNIFF_BYTES, sniffImageType } from "../../src/images/sniff";
import { fuzzParams } from "../fuzz/fuzz-support";
import { makeApng } from "../helpers/images";

const picture = () => sharp({ create: { width: 24, height: 16, channels: 4, background: { r: 30, g: 140, b: 220, alpha: 0.8 } } });

async function animated(format: "gif" | "webp"): Promise<Buffer> {
  const frames = await Promise.all(
    [0, 1, 2].map((i) =>
      sharp({ create: { width: 12, height: 12, channels: 3, background: { r: i * 90, g: 40, b: 90 } } })
        .png()
        .toBuffer(),
    ),
  );
  const joined = sharp(frames, { join: { animated: true } });
  const out = format === "gif" ? await joined.gif().toBuffer() : await joined.webp().toBuffer();
  expect((await sharp(out, { animated: true }).metadata()).pages).toBe(3); // really animated
  return out;
}

const text = (s: string) => new Uint8Array(Buffer.from(s, "latin1"));

/** Sniffs exactly what an upload handler would read: the first SNIFF_BYTES of the file. */
const sniff = (bytes: Uint8Array) => sniffImageType(bytes.subarray(0, SNIFF_BYTES));

describe("sniffImageType accepts real images by content", () => {
  test("JPEG", async () => {
    expect(sniff(await picture().jpeg().toBuffer())).toEqual({ mime: "image/jpeg", ext: "jpg" });
    // Progressive JPEG and one carrying EXIF (APP1 first instead of APP0) start the same way.
    expect(sniff(await picture().jpeg({ progressive: true }).toBuffer())?.mime).toBe("image/jpeg");
    expect(sniff(await picture().jpeg().withMetadata({ orientation: 3 }).toBuffer())?.mime).toBe("image/jpeg");
  });

  test("PNG", async () => {
    expect(sniff(await picture().png().toBuffer())).toEqual({ mime: "image/png", ext: "png" });
  });

  test("GIF, still and animated", async () => {
    expect(sniff(await picture().gif().toBuffer())).toEqual({ mime: "image/gif", ext: "gif" });
    expect(sniff(await animated("gif"))).toEqual({ mime: "image/gif", ext: "gif" });
    // GIF87a is as valid as GIF89a.
    const gif = await picture().gif().toBuffer();
    gif.write("GIF87a", 0, "latin1");
    expect(sniff(gif)?.mime).toBe("image/gif");
  });

  test("WebP: lossy (VP8), lossless (VP8L), extended (VP8X) and animated", async () => {
    const lossy = await sharp({ create: { width: 8, height: 8, channels: 3, background: "red" } })
      .webp()
      .toBuffer();
    const lossless = await picture().webp({ lossless: true }).toBuffer();
    const extended = await picture().webp().withMetadata({ orientation: 6 }).toBuffer();
    expect(lossy.toString("latin1", 12, 16)).toBe("VP8 ");
    expect(lossless.toString("latin1", 12, 16)).toBe("VP8L");
    expect(extended.toString("latin1", 12, 16)).toBe("VP8X");
    for (const b of [lossy, lossless, extended, await animated("webp")]) {
      expect(sniff(b)).toEqual({ mime: "image/webp", ext: "webp" });
    }
  });

  test("AVIF by major brand, by compatible brand, and image sequences (avis)", async () => {
    const avif = await picture().avif().toBuffer();
    expect(avif.toString("latin1", 4, 12)).toBe("ftypavif");
    expect(sniff(avif)).toEqual({ mime: "image/avif", ext: "avif" });

    const viaCompatible = Buffer.from(avif);
    viaCompatible.write("mif1", 8, "latin1"); // major brand generic HEIF; "avif" only listed as compatible
    expect(viaCompatible.subarray(16, avif.readUInt32BE(0)).toString("latin1")).toContain("avif");
    expect(sniff(viaCompatible)?.mime).toBe("image/avif");

    const sequence = Buffer.from(avif);
    sequence.write("avis", 8, "latin1");
    expect(sniff(sequence)?.mime).toBe("image/avif");
  });
});

describe("sniffImageType rejects everything else", () => {
  test("active or document content: SVG, HTML, XML, PDF", () => {
    const svg = '<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10"><script>alert(1)</script></svg>';
    for (const s of [
      svg,
      `<?xml version="1.0"?>\n${svg}`,
      `\n\n  ${svg}`,
      "<!doctype html><html><body><img src=x onerror=alert(1)></body></html>",
      '<?xml version="1.0"?><note>hi</note>',
      "%PDF-1.7\n%\xe2\xe3\xcf\xd3\n1 0 obj\n<<>>\nendobj\n",
    ]) {
      expect(sniff(text(s))).toBeNull();
    }
  });

  test("HEIC even though it is ISO-BMFF like AVIF", async () => {
    // What an iPhone photo starts with: ftyp box, major brand heic, compatible mif1 heic.
    const heic = Buffer.alloc(64);
    heic.writeUInt32BE(24, 0);
    heic.write("ftypheic\0\0\0\0mif1heic", 4, "latin1");
    heic.writeUInt32BE(40, 24);
    heic.write("meta", 28, "latin1");
    expect(sniff(heic)).toBeNull();

    // A real AVIF relabelled so that no avif/avis brand remains is no longer accepted...
    const avif = await picture().avif().toBuffer();
    const relabelled = Buffer.from(avif);
    const ftypEnd = avif.readUInt32BE(0);
    for (let off = 8; off + 4 <= ftypEnd; off += 4) {
      const brand = relabelled.toString("latin1", off, off + 4);
      if (brand === "avif" || brand === "avis") relabelled.write("heic", off, "latin1");
    }
    expect(sniff(relabelled)).toBeNull();
    // ...and a HEIC major brand wins over a stray compatible "avif".
    const heicMajor = Buffer.from(avif);
    heicMajor.write("heic", 8, "latin1");
    expect(sniff(heicMajor)).toBeNull();
  });

  test("other image formats: BMP, TIFF", async () => {
    const tiff = await picture().tiff().toBuffer();
    expect((await sharp(tiff).metadata()).format).toBe("tiff"); // it IS an image, just not one we serve
    expect(sniff(tiff)).toBeNull();

    // Minimal valid 1x1 24-bit BMP: file header + BITMAPINFOHEADER + one padded pixel row.
    const bmp = Buffer.alloc(58);
    bmp.write("BM", 0, "latin1");
    bmp.writeUInt32LE(58, 2);
    bmp.writeUInt32LE(54, 10);
    bmp.writeUInt32LE(40, 14);
    bmp.writeInt32LE(1, 18);
    bmp.writeInt32LE(1, 22);
    bmp.writeUInt16LE(1, 26);
    bmp.writeUInt16LE(24, 28);
    bmp.writeUInt32LE(4, 34);
    expect(sniff(bmp)).toBeNull();
  });

  test("text or other files that merely carry an image name, and truncated or shifted magic", async () => {
    expect(sniff(text("this is photo.jpg, honest"))).toBeNull();
    expect(sniff(text("GIF89"))).toBeNull(); // one byte short of the signature
    expect(sniff(new Uint8Array([0xff, 0xd8]))).toBeNull();
    expect(sniff(new Uint8Array(0))).toBeNull();
    expect(sniff(text("RIFF\x24\0\0\0WAVEfmt \x10\0\0\0"))).toBeNull();
    expect(sniff(text("RIFF\x24\0\0\0WEBPJUNK"))).toBeNull();
    expect(sniff(text("\0\0\0\x08ftyp"))).toBeNull();
    // A real JPEG behind an HTML prefix (a polyglot) is judged by its first bytes: HTML.
    const jpeg = await picture().jpeg().toBuffer();
    expect(sniff(Buffer.concat([Buffer.from("<html>"), jpeg]))).toBeNull();
  });
});

test("SNIFF_BYTES covers an AVIF whose avif brand comes late in a long ftyp box", async () => {
  const avif = await picture().avif().toBuffer();
  const oldSize = avif.readUInt32BE(0);
  // Rebuild the ftyp box with 200 filler brands before "avif" (major brand generic).
  const brands = [...Array.from({ length: 200 }, () => "mif1"), "avif"].join("");
  const ftyp = Buffer.alloc(16 + brands.length);
  ftyp.writeUInt32BE(ftyp.length, 0);
  ftyp.write(`ftypmif1\0\0\0\0${brands}`, 4, "latin1");
  const rebuilt = Buffer.concat([ftyp, avif.subarray(oldSize)]);
  expect(ftyp.length).toBeLessThan(SNIFF_BYTES);
  expect(ftyp.length).toBeGreaterThan(64);
  expect(sniff(rebuilt)?.mime).toBe("image/avif");
  // With only the first 64 bytes, the late brand is not visible: that's why the head is larger.
  expect(sniffImageType(rebuilt.subarray(0, 64))).toBeNull();
});

describe("isAnimatedPng (APNG: acTL before the first IDAT)", () => {
  const signature = [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a];
  const chunk = (type: string, length: number) => {
    const out = new Uint8Array(12 + length);
    new DataView(out.buffer).setUint32(0, length);
    out.set(new TextEncoder().encode(type), 4);
    return out;
  };
  const TYPES = ["IHDR", "iCCP", "tEXt", "acTL", "IDAT", "fcTL", "IEND", "zzZz"];

  test("a real APNG is animated; a still PNG, a GIF and random bytes are not", async () => {
    expect(isAnimatedPng((await makeApng(20, 20, 2)).subarray(0, SNIFF_BYTES))).toBe(true);
    expect(isAnimatedPng(await picture().png().toBuffer())).toBe(false);
    expect(isAnimatedPng(await animated("gif"))).toBe(false);
  });

  test("property: answers whether acTL comes before IDAT/IEND within the head, for any chunk list; never throws on any bytes", () => {
    fc.assert(
      fc.property(fc.array(fc.record({ type: fc.constantFrom(...TYPES), length: fc.nat(3000) }), { maxLength: 12 }), (chunks) => {
        const head = Buffer.concat([Uint8Array.from(signature), ...chunks.map((c) => chunk(c.type, c.length))]).subarray(0, SNIFF_BYTES);
        let expected = false;
        let off = 8;
        for (const c of chunks) {
          if (off + 8 > head.length || c.type === "IDAT" || c.type === "IEND") break;
          if (c.type === "acTL") {
            expected = true;
            break;
          }
          off += 12 + c.length;
        }
        expect(isAnimatedPng(head)).toBe(expected);
      }),
      fuzzParams(5),
    );
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: SNIFF_BYTES }), (tail) => {
        expect(typeof isAnimatedPng(Buffer.concat([Uint8Array.from(signature), tail]))).toBe("boolean");
      }),
      fuzzParams(5),
    );
  });
});
