// The PNG, WebP and GIF walkers of exif_policy=strip (exif.ts), rule by rule, on files built chunk by
// chunk around real encoder output: which chunks and extensions go, which stay, where the minimal
// EXIF goes back, and which broken structures are refused (so the caller re-encodes) rather than
// passed through. Each case is a rule a mutant of the walker broke while exif.test.ts still passed.
import { describe, expect, test } from "bun:test";
import { crc32, deflateSync } from "node:zlib";
import { pngChunk } from "../helpers/images";
import sharp from "sharp";
import { MalformedImageError, stripMetadataBytes } from "../../src/images/exif";
import { exifFacts, minimalExif } from "../../src/images/exif-parts";

const strip = (b: Buffer, mime: string) => stripMetadataBytes(Buffer.from(b), mime);
const pixels = async (b: Buffer) => (await sharp(b).raw().toBuffer()).toString("hex");
const sample = (format: "png" | "webp") =>
  sharp({ create: { width: 6, height: 4, channels: 3, background: "#3a6" } })
    .toFormat(format)
    .toBuffer();

// ---------------------------------------------------------------- PNG

/** The chunks of a PNG as [type, data]. */
const pngChunks = (b: Buffer) => {
  const out: [string, Buffer][] = [];
  for (let pos = 8; pos < b.length; ) {
    const len = b.readUInt32BE(pos);
    out.push([b.toString("latin1", pos + 4, pos + 8), b.subarray(pos + 8, pos + 8 + len)]);
    expect(b.readUInt32BE(pos + 8 + len)).toBe(crc32(b.subarray(pos + 4, pos + 8 + len))); // every CRC valid
    pos += 12 + len;
  }
  return out;
};
const AFTER_IHDR = 8 + 25;
/** `png` with `before` inserted right after IHDR and `after` right before IEND. */
const pngWith = (png: Buffer, before: Buffer[], after: Buffer[] = []) =>
  Buffer.concat([png.subarray(0, AFTER_IHDR), ...before, png.subarray(AFTER_IHDR, png.length - 12), ...after, png.subarray(png.length - 12)]);
const exifOf = (orientation: number, prefix = false) => minimalExif({ orientation }, prefix);

describe("PNG walker", () => {
  test("zTXt (compressed text) and iDOT are dropped like tEXt, iTXt, tIME and eXIf", async () => {
    const png = await sample("png");
    const ztxt = pngChunk("zTXt", Buffer.concat([Buffer.from("Comment\0\0", "latin1"), deflateSync("KuraSecretComment")]));
    const idot = pngChunk("iDOT", Buffer.alloc(28, 1));
    const original = pngWith(png, [ztxt, idot]);
    expect(await pixels(original)).toBe(await pixels(png)); // still a valid PNG with our additions
    const out = strip(original, "image/png").bytes;
    expect(out.equals(png)).toBe(true);
  });

  test("an eXIf after the image data is not written back: its orientation never showed", async () => {
    const png = await sample("png");
    const { bytes, orientation } = strip(pngWith(png, [], [pngChunk("eXIf", exifOf(6))]), "image/png");
    expect(orientation).toBe(1);
    expect(bytes.equals(png)).toBe(true);
  });

  test("of two eXIf chunks before the image data, the first decides; one eXIf comes back, right after IHDR", async () => {
    const png = await sample("png");
    const out = strip(pngWith(png, [pngChunk("eXIf", exifOf(3)), pngChunk("eXIf", exifOf(6))]), "image/png");
    expect(out.orientation).toBe(3);
    const types = pngChunks(out.bytes).map(([t]) => t);
    expect(types.slice(0, 2)).toEqual(["IHDR", "eXIf"]);
    expect(types.filter((t) => t === "eXIf")).toHaveLength(1);
    expect((await sharp(out.bytes).metadata()).orientation).toBe(3);
  });

  test("the written eXIf keeps an 'Exif\\0\\0' prefix exactly when the original had one", async () => {
    const png = await sample("png");
    for (const prefix of [false, true]) {
      const out = strip(pngWith(png, [pngChunk("eXIf", exifOf(8, prefix))]), "image/png").bytes;
      const exif = pngChunks(out).find(([t]) => t === "eXIf")![1];
      expect(exif.equals(exifOf(8, prefix))).toBe(true);
      expect(exifFacts(exif).orientation).toBe(8);
    }
  });

  test("bytes after IEND are dropped; a PNG without IHDR first, without IEND or with a chunk past the end is refused", async () => {
    const png = await sample("png");
    expect(strip(Buffer.concat([png, Buffer.from("KuraSecretTrailer")]), "image/png").bytes.equals(png)).toBe(true);
    const noIhdr = Buffer.concat([png.subarray(0, 8), png.subarray(AFTER_IHDR)]);
    const badLength = Buffer.from(png);
    badLength.writeUInt32BE(png.length, AFTER_IHDR); // the chunk after IHDR claims more than the file holds
    const refused = [
      noIhdr,
      badLength,
      png.subarray(0, png.length - 12),
      png.subarray(0, png.length - 1),
      Buffer.concat([Buffer.from("\x89PNX"), png.subarray(4)]),
    ];
    for (const file of refused) expect(() => strip(file, "image/png")).toThrow(MalformedImageError);
  });
});

// ---------------------------------------------------------------- WebP

/** RIFF sizes are little-endian whatever the machine. */
const u32le = (n: number) => {
  const b = Buffer.alloc(4);
  b.writeUInt32LE(n);
  return b;
};
const riffChunk = (fourcc: string, data: Buffer, pad = true) =>
  Buffer.concat([Buffer.from(fourcc, "latin1"), u32le(data.length), data, Buffer.alloc(pad ? data.length & 1 : 0)]);
const riff = (chunks: Buffer[], trailer = Buffer.alloc(0)) => {
  const body = Buffer.concat(chunks);
  const head = Buffer.alloc(12);
  head.write("RIFF", 0, "latin1");
  head.writeUInt32LE(body.length + 4, 4);
  head.write("WEBP", 8, "latin1");
  return Buffer.concat([head, body, trailer]);
};
/** The chunks of an extended WebP made by sharp, VP8X first. */
async function webpChunks(): Promise<Buffer[]> {
  const made = await sharp({ create: { width: 6, height: 4, channels: 3, background: "#3a6" } })
    .webp()
    .withMetadata({ orientation: 1 })
    .keepIccProfile()
    .toBuffer();
  const chunks: Buffer[] = [];
  for (let pos = 12; pos < made.length; ) {
    const size = made.readUInt32LE(pos + 4);
    // sharp writes an EXIF chunk even for orientation 1: leave it out, and its flag.
    if (made.toString("latin1", pos, pos + 4) !== "EXIF") chunks.push(made.subarray(pos, pos + 8 + size + (size & 1)));
    pos += 8 + size + (size & 1);
  }
  expect(chunks[0].toString("latin1", 0, 4)).toBe("VP8X");
  chunks[0] = Buffer.from(chunks[0]);
  chunks[0][8] &= ~0x08;
  return chunks;
}
const fourccs = (b: Buffer) => {
  const out: string[] = [];
  for (let pos = 12; pos < b.length; ) {
    const size = b.readUInt32LE(pos + 4);
    out.push(`${b.toString("latin1", pos, pos + 4)}:${size}`);
    pos += 8 + size + (size & 1);
  }
  return out;
};

describe("WebP walker", () => {
  test("an odd-sized chunk keeps its pad byte; a last chunk missing its pad gets one; the RIFF size follows", async () => {
    const chunks = await webpChunks();
    const odd = riffChunk("KURA", Buffer.from("abc"));
    const original = riff([...chunks, odd, riffChunk("XMP ", Buffer.from("KuraSecretXmp")), riffChunk("LAST", Buffer.from("xyz"), false)]);
    const out = strip(original, "image/webp").bytes;
    expect(out.equals(riff([...chunks, odd, riffChunk("LAST", Buffer.from("xyz"))]))).toBe(true);
    expect(out.readUInt32LE(4)).toBe(out.length - 8);
    expect(out.length % 2).toBe(0);
    expect(await pixels(out)).toBe(await pixels(riff(chunks)));
  });

  test("an EXIF chunk without the 'Exif\\0\\0' prefix is written back without it, after the image data, with the EXIF flag", async () => {
    const chunks = await webpChunks();
    const out = strip(riff([...chunks, riffChunk("EXIF", exifOf(6))]), "image/webp");
    expect(out.orientation).toBe(6);
    expect(fourccs(out.bytes)).toEqual([...fourccs(riff(chunks)), `EXIF:${exifOf(6).length}`]);
    expect(out.bytes.subarray(out.bytes.length - exifOf(6).length).equals(exifOf(6))).toBe(true);
    expect(out.bytes[20] & 0x0c).toBe(0x08);
    expect((await sharp(out.bytes).metadata()).orientation).toBe(6);
  });

  test("bytes after the RIFF container are dropped; a RIFF size past the end or a chunk past the RIFF is refused", async () => {
    const chunks = await webpChunks();
    const clean = riff(chunks);
    expect(strip(riff(chunks, Buffer.from("KuraSecretTrailer")), "image/webp").bytes.equals(clean)).toBe(true);
    const simple = await sample("webp");
    expect(simple.toString("latin1", 12, 16)).not.toBe("VP8X");
    expect(strip(Buffer.concat([simple, Buffer.from("KuraSecretTrailer")]), "image/webp").bytes.equals(simple)).toBe(true);

    const pastEnd = Buffer.from(clean);
    pastEnd.writeUInt32LE(clean.length, 4);
    const chunkPast = riff([...chunks, Buffer.from("KURA\xff\0\0\0", "latin1")]);
    const headCut = riff([...chunks, Buffer.from("KURA", "latin1")]);
    for (const file of [pastEnd, chunkPast, headCut, clean.subarray(0, 19), Buffer.concat([Buffer.from("RIFX"), clean.subarray(4)])]) {
      expect(() => strip(file, "image/webp")).toThrow(MalformedImageError);
    }
  });
});

// ---------------------------------------------------------------- GIF

/** A 1x1 GIF89a without a global colour table; its one frame has a local colour table of two entries. */
const GIF_HEAD = Buffer.from([...Buffer.from("GIF89a"), 1, 0, 1, 0, 0x00, 0, 0]);
const GIF_FRAME = Buffer.from([0x2c, 0, 0, 0, 0, 1, 0, 1, 0, 0x80, 0xff, 0, 0, 0, 0xff, 0, 2, 2, 0x44, 0x01, 0]);
const gifExtension = (label: number, first: Buffer, data: Buffer[] = []) =>
  Buffer.concat([Buffer.from([0x21, label, first.length]), first, ...data.map((d) => Buffer.concat([Buffer.from([d.length]), d])), Buffer.from([0])]);
const app = (id: string, ...data: string[]) =>
  gifExtension(
    0xff,
    Buffer.from(id, "latin1"),
    data.map((d) => Buffer.from(d, "latin1")),
  );

describe("GIF walker", () => {
  test("keeps ANIMEXTS and ICC application extensions and plain text; drops other applications, comments and an 11-byte look-alike", async () => {
    const kept = [
      app("ANIMEXTS1.0", "\x01\x00\x00"),
      app("ICCRGBG1012", "KuraProfileBytes"),
      gifExtension(0x01, Buffer.alloc(12), [Buffer.from("shown text")]),
      gifExtension(0xf9, Buffer.from([0, 10, 0, 0])),
    ];
    const dropped = [app("XMP DataXMP", "KuraSecretXmp"), gifExtension(0xfe, Buffer.from("KuraSecretComment")), app("NETSCAPE2.0X", "\x01\x00\x00")];
    const original = Buffer.concat([GIF_HEAD, dropped[0], kept[0], dropped[1], kept[1], dropped[2], kept[2], kept[3], GIF_FRAME, Buffer.from([0x3b])]);
    expect((await sharp(original).metadata()).width).toBe(1); // decodable with everything in it
    const out = strip(original, "image/gif").bytes;
    expect(out.equals(Buffer.concat([GIF_HEAD, ...kept, GIF_FRAME, Buffer.from([0x3b])]))).toBe(true);
  });

  test("a frame's local colour table is walked over; GIF87a is accepted; a file cut between blocks is closed with a trailer", async () => {
    const whole = Buffer.concat([GIF_HEAD, GIF_FRAME, Buffer.from([0x3b])]);
    expect(await pixels(whole)).toBe("ff0000");
    expect(strip(whole, "image/gif").bytes.equals(whole)).toBe(true);
    const old = Buffer.concat([Buffer.from("GIF87a"), whole.subarray(6)]);
    expect(strip(old, "image/gif").bytes.equals(old)).toBe(true);
    expect(strip(whole.subarray(0, whole.length - 1), "image/gif").bytes.equals(whole)).toBe(true);
    expect(strip(Buffer.concat([whole, Buffer.from("KuraSecretTrailer")]), "image/gif").bytes.equals(whole)).toBe(true);
  });

  test("refused: a short or unknown header, an unknown block, a cut image descriptor or unterminated sub-blocks", () => {
    const refused = [
      GIF_HEAD.subarray(0, 12),
      Buffer.concat([Buffer.from("GIF90a"), GIF_HEAD.subarray(6), GIF_FRAME]),
      Buffer.concat([GIF_HEAD, Buffer.from([0x2a, 0, 0])]),
      Buffer.concat([GIF_HEAD, GIF_FRAME.subarray(0, 10)]),
      Buffer.concat([GIF_HEAD, GIF_FRAME.subarray(0, GIF_FRAME.length - 1)]),
      Buffer.concat([GIF_HEAD, app("XMP DataXMP", "KuraSecretXmp").subarray(0, 20)]),
    ];
    for (const file of refused) expect(() => strip(file, "image/gif")).toThrow(MalformedImageError);
  });
});
