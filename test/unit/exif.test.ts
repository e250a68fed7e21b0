import { afterAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pngChunk } from "../helpers/images";
import sharp from "sharp";
import { MalformedImageError, readOrientation, reencodeWithoutMetadata, stripMetadata, stripMetadataBytes } from "../../src/images/exif";
import { exiftool, exiftoolWrite, personalTags } from "../helpers/metadata";

const dir = mkdtempSync(join(tmpdir(), "kura-exif-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

// Strings that must not survive stripping, planted through every metadata channel.
const SECRETS = ["KuraCam", "KuraModel", "KuraSecretXmp", "KuraSecretComment", "KuraSecretIptc", "KuraSecretTrailer"];
const XMP = `<x:xmpmeta xmlns:x="adobe:ns:meta/"><rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#"><rdf:Description rdf:about="" xmlns:dc="http://purl.org/dc/elements/1.1/"><dc:creator>KuraSecretXmp</dc:creator></rdf:Description></rdf:RDF></x:xmpmeta>`;
const EXIF = {
  IFD0: { Make: "KuraCam", Model: "KuraModel" },
  IFD3: { GPSLatitudeRef: "N", GPSLatitude: "35/1 40/1 12/1", GPSLongitudeRef: "E", GPSLongitude: "139/1 45/1 30/1" },
};

/** A 48x32 picture with distinct pixels everywhere, so any pixel change or rotation shows. */
function photo(width = 48, height = 32) {
  const px = Buffer.alloc(width * height * 3);
  for (let i = 0; i < width * height; i++) {
    const x = i % width;
    const y = Math.floor(i / width);
    px[i * 3] = (x * 5) & 255;
    px[i * 3 + 1] = (y * 7) & 255;
    px[i * 3 + 2] = ((x * y) ^ 0x5a) & 255;
  }
  return sharp(px, { raw: { width, height, channels: 3 } });
}

let n = 0;
async function strip(bytes: Buffer, mime: string): Promise<Buffer> {
  const input = join(dir, `in-${++n}`);
  const output = join(dir, `out-${n}`);
  await Bun.write(input, bytes);
  await stripMetadata(input, output, mime);
  return Buffer.from(await Bun.file(output).arrayBuffer());
}

const raw = (b: Buffer, animated = false) => sharp(b, { animated }).raw().toBuffer({ resolveWithObject: true });
const displayed = (b: Buffer) => sharp(b).rotate().raw().toBuffer({ resolveWithObject: true });

function expectNoSecrets(b: Buffer) {
  const text = b.toString("latin1");
  for (const s of SECRETS) expect(text).not.toContain(s);
  // No GPS IFD pointer (tag 0x8825) in either byte order.
  expect(b.includes(Buffer.from([0x88, 0x25, 0x00, 0x04]))).toBe(false);
  expect(b.includes(Buffer.from([0x25, 0x88, 0x04, 0x00]))).toBe(false);
}

/** Tag ids in IFD0 of an EXIF payload (with or without the "Exif\0\0" prefix). */
function ifd0Tags(exif: Buffer): number[] {
  const t = exif.toString("latin1", 0, 4) === "Exif" ? exif.subarray(6) : exif;
  const le = t.toString("latin1", 0, 2) === "II";
  const u16 = (o: number) => (le ? t.readUInt16LE(o) : t.readUInt16BE(o));
  const ifd = le ? t.readUInt32LE(4) : t.readUInt32BE(4);
  return Array.from({ length: u16(ifd) }, (_, i) => u16(ifd + 2 + i * 12));
}

/** Checks shared by every lossless format: metadata gone, orientation and pixels unchanged. */
async function expectCleanLossless(original: Buffer, out: Buffer, orientation: number) {
  expectNoSecrets(out);
  const meta = await sharp(out).metadata();
  expect(meta.xmp).toBeUndefined();
  expect(meta.iptc).toBeUndefined();
  if (orientation === 1) {
    expect(meta.exif).toBeUndefined();
  } else {
    expect(meta.orientation).toBe(orientation);
    expect(ifd0Tags(meta.exif!)).toEqual([0x0112]); // Orientation and nothing else
  }
  const [a, b] = await Promise.all([raw(original), raw(out)]);
  expect(b.info).toEqual(a.info);
  expect(b.data.equals(a.data)).toBe(true); // pixel data untouched
  const [da, db] = await Promise.all([displayed(original), displayed(out)]);
  expect([db.info.width, db.info.height]).toEqual([da.info.width, da.info.height]);
  expect(db.data.equals(da.data)).toBe(true); // displayed the same way
}

const jpegSegment = (marker: number, payload: Buffer) => {
  const head = Buffer.from([0xff, marker, 0, 0]);
  head.writeUInt16BE(payload.length + 2, 2);
  return Buffer.concat([head, payload]);
};
/** Puts extra segments right after SOI and junk after EOI, as cameras and editors do. */
const withJpegExtras = (jpeg: Buffer) =>
  Buffer.concat([
    jpeg.subarray(0, 2),
    jpegSegment(0xfe, Buffer.from("KuraSecretComment")),
    jpegSegment(0xed, Buffer.from("Photoshop 3.0\x008BIM\x04\x04\0\0\0\0\0\x10KuraSecretIptc", "latin1")),
    jpeg.subarray(2),
    Buffer.from("KuraSecretTrailer"),
  ]);

describe("JPEG (lossless)", () => {
  test("drops EXIF with GPS and camera, XMP, IPTC, comments and trailers; keeps orientation 6 and pixels", async () => {
    const original = withJpegExtras(await photo().jpeg().withExif(EXIF).withMetadata({ orientation: 6 }).withXmp(XMP).toBuffer());
    for (const s of SECRETS) expect(original.toString("latin1")).toContain(s); // all planted
    const before = await sharp(original).metadata();
    expect([before.orientation, before.xmp !== undefined, before.iptc !== undefined]).toEqual([6, true, true]);

    const out = await strip(original, "image/jpeg");
    await expectCleanLossless(original, out, 6);
    expect((await sharp(out).metadata()).icc).toEqual(before.icc); // colour profile kept
    const shown = await sharp(out).rotate().toBuffer({ resolveWithObject: true });
    expect([shown.info.width, shown.info.height]).toEqual([32, 48]);
  });

  test("every orientation 2..8 is carried over", async () => {
    for (const orientation of [2, 3, 4, 5, 7, 8]) {
      const original = await photo(24, 16).jpeg().withExif(EXIF).withMetadata({ orientation }).toBuffer();
      const out = await strip(original, "image/jpeg");
      expect((await sharp(out).metadata()).orientation).toBe(orientation);
      expectNoSecrets(out);
    }
  });

  test("orientation 1 leaves no EXIF at all", async () => {
    const original = await photo().jpeg().withExif(EXIF).withXmp(XMP).toBuffer();
    await expectCleanLossless(original, await strip(original, "image/jpeg"), 1);
  });

  test("a progressive JPEG (several scans) keeps every scan", async () => {
    const original = withJpegExtras(await photo().jpeg({ progressive: true }).withExif(EXIF).withMetadata({ orientation: 8 }).withXmp(XMP).toBuffer());
    await expectCleanLossless(original, await strip(original, "image/jpeg"), 8);
  });

  test("a JPEG without metadata comes out byte for byte the same", async () => {
    const original = await photo().jpeg({ quality: 70 }).toBuffer();
    const out = await strip(original, "image/jpeg");
    expect(out.equals(original)).toBe(true);
    expect((await raw(out)).data.equals((await raw(original)).data)).toBe(true);
    // Nothing to strip: the very same buffer comes back, no copy of the image is made.
    expect(stripMetadataBytes(original, "image/jpeg").bytes).toBe(original);
    const tagged = await photo().jpeg({ quality: 70 }).withExif(EXIF).toBuffer();
    expect(stripMetadataBytes(tagged, "image/jpeg").bytes).not.toBe(tagged);
  });

  test("stripping inside the source's own memory gives the same bytes as a copy", async () => {
    const cases: [Buffer, string][] = [
      [await photo().jpeg().withExif(EXIF).withXmp(XMP).toBuffer(), "image/jpeg"],
      [withJpegExtras(await photo().jpeg({ progressive: true }).withExif(EXIF).withXmp(XMP).toBuffer()), "image/jpeg"],
      [await photo().jpeg().withExif(EXIF).withMetadata({ orientation: 6 }).toBuffer(), "image/jpeg"],
      [await photo().png().withExif(EXIF).withXmp(XMP).toBuffer(), "image/png"],
      [await photo(8, 8).png().withMetadata({ orientation: 3 }).toBuffer(), "image/png"],
      [await photo(8, 8).jpeg().withExif(EXIF).withMetadata({ orientation: 6 }).toBuffer(), "image/jpeg"],
    ];
    for (const [original, mime] of cases) {
      const source = Buffer.from(original);
      const copied = stripMetadataBytes(original, mime).bytes;
      const reused = stripMetadataBytes(source, mime, true).bytes;
      expect(reused.equals(copied)).toBe(true);
      expect(copied.buffer).not.toBe(original.buffer);
      for (const secret of SECRETS) expect(reused.includes(secret)).toBe(false);
      // Pieces all from the source: rearranged in place, no new buffer.
      const rotated = stripMetadataBytes(original, mime).orientation !== 1;
      if (!rotated) expect(reused.buffer).toBe(source.buffer);
    }
  });

  test("a JFIF thumbnail is removed, the JFIF header kept", async () => {
    const original = await photo().jpeg().toBuffer();
    // JFIF 1.02, no density units, 1:1, followed by a 2x2 RGB thumbnail (12 bytes).
    const jfif = (thumb: number, data: string) =>
      jpegSegment(0xe0, Buffer.concat([Buffer.from("JFIF\0", "latin1"), Buffer.from([1, 2, 0, 0, 1, 0, 1, thumb, thumb]), Buffer.from(data)]));
    const withThumb = Buffer.concat([original.subarray(0, 2), jfif(2, "KuraThumbXYZ"), original.subarray(2)]);
    expect((await raw(withThumb)).data.equals((await raw(original)).data)).toBe(true);
    const out = await strip(withThumb, "image/jpeg");
    expect(out.equals(Buffer.concat([original.subarray(0, 2), jfif(0, ""), original.subarray(2)]))).toBe(true);
  });
});

describe("PNG (lossless)", () => {
  test("drops eXIf, text chunks (XMP, comments) and tIME; writes back orientation 6 only", async () => {
    const made = await photo().png().withExif(EXIF).withMetadata({ orientation: 6 }).withXmp(XMP).toBuffer();
    const afterIhdr = 8 + 25;
    const original = Buffer.concat([
      made.subarray(0, afterIhdr),
      pngChunk("tEXt", Buffer.from("Comment\0KuraSecretComment", "latin1")),
      pngChunk("iTXt", Buffer.from("Author\0\0\0\0\0KuraSecretIptc", "latin1")),
      pngChunk("tIME", Buffer.from([0x07, 0xe9, 1, 2, 3, 4, 5])),
      made.subarray(afterIhdr),
      Buffer.from("KuraSecretTrailer"),
    ]);
    expect((await sharp(original).metadata()).orientation).toBe(6);
    const out = await strip(original, "image/png");
    await expectCleanLossless(original, out, 6);
    expect(out.includes(Buffer.from("tIME"))).toBe(false);
    expect((await sharp(out).metadata()).comments).toBeUndefined();
  });

  test("orientation 1 leaves no eXIf; a PNG without metadata is unchanged", async () => {
    const original = await photo().png().withExif(EXIF).withXmp(XMP).toBuffer();
    const out = await strip(original, "image/png");
    await expectCleanLossless(original, out, 1);
    expect(out.includes(Buffer.from("eXIf"))).toBe(false);
    const plain = await photo().png().toBuffer();
    expect((await strip(plain, "image/png")).equals(plain)).toBe(true);
    expect(stripMetadataBytes(plain, "image/png").bytes).toBe(plain);
  });
});

describe("WebP (lossless container edit)", () => {
  test("drops EXIF and XMP chunks, fixes VP8X flags and RIFF size, keeps orientation 6", async () => {
    const original = Buffer.concat([
      await photo().webp({ quality: 80 }).withExif(EXIF).withMetadata({ orientation: 6 }).withXmp(XMP).toBuffer(),
      Buffer.from("KuraSecretTrailer"),
    ]);
    const out = await strip(original, "image/webp");
    await expectCleanLossless(original, out, 6);
    expect(out.readUInt32LE(4)).toBe(out.length - 8);
    expect(out.toString("latin1", 12, 16)).toBe("VP8X");
    const flags = out[20];
    expect(flags & 0x08).toBe(0x08); // EXIF (orientation only) present
    expect(flags & 0x04).toBe(0); // XMP gone
    expect(out.includes(Buffer.from("XMP "))).toBe(false);
  });

  test("orientation 1: EXIF flag cleared too; a simple lossy WebP is unchanged", async () => {
    const original = await photo().webp({ lossless: true }).withExif(EXIF).withXmp(XMP).toBuffer();
    const out = await strip(original, "image/webp");
    await expectCleanLossless(original, out, 1);
    expect(out[20] & 0x0c).toBe(0);
    expect(out.includes(Buffer.from("EXIF"))).toBe(false);
    const plain = await photo().webp().toBuffer();
    expect(plain.toString("latin1", 12, 16)).toBe("VP8 ");
    expect((await strip(plain, "image/webp")).equals(plain)).toBe(true);
  });

  test("an animated WebP keeps all frames and timing", async () => {
    const frames = await Promise.all(
      [0, 1, 2].map((i) =>
        photo()
          .modulate({ hue: i * 90 })
          .png()
          .toBuffer(),
      ),
    );
    const original = await sharp(frames, { join: { animated: true } })
      .webp({ lossless: true, delay: [100, 200, 300], loop: 2 })
      .withExif(EXIF)
      .withXmp(XMP)
      .toBuffer();
    expect((await sharp(original).metadata()).xmp).toBeDefined();
    const out = await strip(original, "image/webp");
    expectNoSecrets(out);
    const [mo, mi] = await Promise.all([sharp(out).metadata(), sharp(original).metadata()]);
    expect([mo.pages, mo.delay, mo.loop, mo.xmp, mo.exif]).toEqual([3, [100, 200, 300], 2, undefined, undefined]);
    expect(mi.pages).toBe(3);
    expect((await raw(out, true)).data.equals((await raw(original, true)).data)).toBe(true);
  });
});

describe("GIF (lossless)", () => {
  test("drops comment and XMP extensions, keeps frames, timing and looping", async () => {
    const frames = await Promise.all(
      [0, 1, 2].map((i) =>
        photo(16, 16)
          .modulate({ hue: i * 90 })
          .png()
          .toBuffer(),
      ),
    );
    const made = await sharp(frames, { join: { animated: true } })
      .gif({ delay: [100, 200, 300], loop: 3 })
      .toBuffer();
    const gct = made[10] & 0x80 ? 3 * (2 << (made[10] & 7)) : 0;
    const comment = Buffer.concat([Buffer.from([0x21, 0xfe, 17]), Buffer.from("KuraSecretComment"), Buffer.from([0])]);
    // XMP's GIF embedding: raw packet, then a 258-byte "magic trailer" that makes the
    // packet parse as sub-blocks.
    const magic = Buffer.from([1, ...Array.from({ length: 256 }, (_, i) => 255 - i), 0]);
    const xmp = Buffer.concat([Buffer.from([0x21, 0xff, 11]), Buffer.from("XMP DataXMP"), Buffer.from(XMP), magic]);
    const original = Buffer.concat([made.subarray(0, 13 + gct), comment, xmp, made.subarray(13 + gct), Buffer.from("KuraSecretTrailer")]);
    const before = await sharp(original).metadata();
    expect([before.pages, before.loop]).toEqual([3, 3]); // still a valid GIF with our additions

    const out = await strip(original, "image/gif");
    expectNoSecrets(out);
    expect(out.equals(made)).toBe(true); // exactly the GIF before we added metadata
    const after = await sharp(out).metadata();
    expect([after.pages, after.delay, after.loop]).toEqual([3, [100, 200, 300], 3]);
    expect((await raw(out, true)).data.equals((await raw(original, true)).data)).toBe(true);
  });
});

describe("Adobe RGB marked only in EXIF (DCF option file: InteropIndex R03, ColorSpace Uncalibrated)", () => {
  // A camera in Adobe RGB mode writes no ICC profile; colour-managed editors read these two tags.
  const r03 = ["-ColorSpace#=65535", "-InteropIndex=R03", "-Make=KuraCam", "-GPSLatitude=35.6", "-GPSLatitudeRef=N"];
  for (const fmt of ["jpeg", "png", "webp"] as const) {
    test(`${fmt}: ColorSpace and InteropIndex kept (with orientation 6 when set), camera and GPS gone`, async () => {
      for (const orientation of [1, 6]) {
        const made = await photo().toFormat(fmt).withMetadata({ orientation }).toBuffer();
        const original = await exiftoolWrite(made, r03);
        expect((await exiftool(original))["IFD0:Make"]).toBe("KuraCam");
        const out = await strip(original, `image/${fmt}`);
        const tags = await exiftool(out);
        expect([tags["ExifIFD:ColorSpace"], tags["InteropIFD:InteropIndex"]]).toEqual(["Uncalibrated", "R03 - DCF option file (Adobe RGB)"]);
        expect(tags["IFD0:Orientation"]).toBe(orientation === 6 ? "Rotate 90 CW" : undefined);
        expect(personalTags(tags, [/^ExifIFD:ColorSpace$/, /^InteropIFD:InteropIndex$/, /^IFD0:Orientation$/])).toEqual([]);
        expect((await raw(out)).data.equals((await raw(original)).data)).toBe(true);
      }
    });
  }

  test("ColorSpace without R03 (what editors write next to an ICC profile) is not kept", async () => {
    const original = await exiftoolWrite(await photo().jpeg().toBuffer(), ["-ColorSpace#=65535", "-Make=KuraCam"]);
    expect((await sharp(await strip(original, "image/jpeg")).metadata()).exif).toBeUndefined();
  });
});

describe("errors and orientation reading", () => {
  test("broken containers are reported, never passed through", async () => {
    const png = await photo().png().toBuffer();
    expect(() => stripMetadataBytes(png.subarray(0, 60), "image/png")).toThrow(MalformedImageError);
    const jpeg = await photo().jpeg().toBuffer();
    expect(() => stripMetadataBytes(Buffer.concat([jpeg.subarray(0, 2), Buffer.from([0xff, 0xe1, 0xff, 0xff, 1, 2])]), "image/jpeg")).toThrow(
      MalformedImageError,
    );
    // Not decodable either, so the re-encode fallback fails too and the caller gets an error.
    await expect(strip(png.subarray(0, 60), "image/png")).rejects.toThrow();
    await expect(strip(png, "image/svg+xml")).rejects.toThrow();
  });

  test("a file decoders accept but the walker can't is re-encoded clean, orientation baked in", async () => {
    const made = await photo().png().withExif(EXIF).withMetadata({ orientation: 6 }).withXmp(XMP).toBuffer();
    const noIend = made.subarray(0, made.length - 12); // IEND missing: decoders shrug, the walker refuses
    expect(() => stripMetadataBytes(noIend, "image/png")).toThrow(MalformedImageError);
    const out = await strip(noIend, "image/png");
    expectNoSecrets(out);
    const meta = await sharp(out).metadata();
    expect([meta.format, meta.exif, meta.xmp, meta.width, meta.height]).toEqual(["png", undefined, undefined, 32, 48]);
    const [da, db] = await Promise.all([displayed(made), displayed(out)]);
    expect(db.info).toEqual(da.info);
    expect(db.data.equals(da.data)).toBe(true); // PNG re-encoding is itself lossless
  });

  test("a re-encode bakes a JPEG's orientation into the pixels, never a WebP's (browsers do not apply it: orientation.ts)", async () => {
    const stored = async (fmt: "jpeg" | "webp") => {
      const tagged = await photo().resize(32, 48).toFormat(fmt).withMetadata({ orientation: 6 }).toBuffer();
      const meta = await sharp(await reencodeWithoutMetadata(tagged, `image/${fmt}`)).metadata();
      return [meta.width, meta.height, meta.orientation];
    };
    expect(await stored("jpeg")).toEqual([48, 32, undefined]);
    expect(await stored("webp")).toEqual([32, 48, undefined]);
  });

  test("readOrientation", async () => {
    for (const fmt of ["jpeg", "png", "webp"] as const) {
      const path = join(dir, `orient.${fmt}`);
      await photo().toFormat(fmt).withMetadata({ orientation: 5 }).toFile(path);
      expect(await readOrientation(path)).toBe(5);
      await photo().toFormat(fmt).toFile(path);
      expect(await readOrientation(path)).toBe(1);
    }
  });
});
