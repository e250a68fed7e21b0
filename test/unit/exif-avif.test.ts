// exif_policy=strip on AVIF (audit 13 HIGH-2): a file without EXIF/XMP is kept byte for byte, and
// one with them loses only the metadata items; colour signalling (nclx), bit depth, HDR light
// levels, orientation (irot/imir) and the AV1 payload stay as they were. Files are built box by
// box (helpers/avif.ts) so every structure other writers use is covered, not only sharp's.
import { beforeAll, describe, expect, test } from "bun:test";
import sharp from "sharp";
import { MalformedImageError, stripLosslessly, stripMetadataBytes, stripMetadataToBuffer } from "../../src/images/exif";
import { type Av1Image, av1Image, type AvifSpec, buildAvif, findBox } from "../helpers/avif";
import { expectNoPersonalMetadata, exiftool, SECRET_EXIF, SECRET_XMP, secretExif } from "../helpers/metadata";

let image10: Av1Image;
let image8: Av1Image;
let exif: Buffer;
beforeAll(async () => {
  [image10, image8, exif] = await Promise.all([av1Image(24, 16, 10), av1Image(20, 12, 8), secretExif()]);
});

const strip = (b: Buffer) => stripMetadataBytes(Buffer.from(b), "image/avif").bytes;
const pixels = (b: Buffer) => sharp(b).raw().toBuffer({ resolveWithObject: true });
/** An HDR picture as cameras and libavif write it: 10-bit BT.2020 PQ, light levels, rotated and mirrored. */
const hdr = (extra: Partial<AvifSpec> = {}): AvifSpec => ({
  image: image10,
  nclx: [9, 16, 9, true],
  clli: [1000, 400],
  mdcv: true,
  irot: 1,
  imir: 1,
  ...extra,
});
const COLOUR_TAGS = [
  "QuickTime:ColorPrimaries",
  "QuickTime:TransferCharacteristics",
  "QuickTime:MatrixCoefficients",
  "QuickTime:ImagePixelDepth",
  "QuickTime:Rotation",
];

/** The stripped file shows the same picture the same way and carries the same colour and HDR signalling. */
async function expectSamePicture(original: Buffer, out: Buffer) {
  expect(out.length).toBe(original.length); // a container edit: nothing after meta moves
  const [a, b] = await Promise.all([pixels(original), pixels(out)]);
  expect(b.info).toEqual(a.info);
  expect(b.data.equals(a.data)).toBe(true);
  for (const type of ["ipco", "av1C", "colr", "pixi", "clli", "mdcv", "irot", "imir", "ispe"]) {
    expect(findBox(out, type)?.toString("hex")).toBe(findBox(original, type)?.toString("hex"));
  }
  const [before, after] = [await exiftool(original), await exiftool(out)];
  for (const tag of COLOUR_TAGS) expect(after[tag]).toEqual(before[tag]);
  expect((await sharp(out).metadata()).bitsPerSample).toBe((await sharp(original).metadata()).bitsPerSample);
}

describe("AVIF without EXIF or XMP", () => {
  test("comes back as the very same buffer, whatever its colour, depth, HDR and orientation", async () => {
    const files = [
      buildAvif(hdr()),
      buildAvif({ image: image8, nclx: [12, 13, 6, true] }), // Display P3 signalled by nclx only
      buildAvif({ image: image8, ilocVersion: 2, offsetSize: 8, baseOffset: true, infeVersion: 3, iinfVersion: 1, largeMdat: true }),
      await sharp({ create: { width: 8, height: 8, channels: 3, background: "#3a6" } })
        .avif({ bitdepth: 12 })
        .toBuffer(),
    ];
    for (const file of files) {
      expect(stripMetadataBytes(file, "image/avif").bytes).toBe(file);
      expect(stripLosslessly(file, "image/avif")).toBe(file);
      expect((await stripMetadataToBuffer(Buffer.from(file), "image/avif")).equals(file)).toBe(true);
    }
  });
});

describe("AVIF with EXIF and XMP", () => {
  test("loses both items and nothing else: nclx, 10 bits, clli/mdcv, irot/imir and pixels kept", async () => {
    const original = buildAvif(hdr({ exif, xmp: SECRET_XMP }));
    const before = await sharp(original).metadata();
    expect(before.exif?.toString("latin1")).toContain("KuraCam");
    expect(before.xmp?.toString()).toContain("KuraSecretXmp");
    expect((await exiftool(original))["GPS:GPSLatitude"]).toBeDefined();

    const out = strip(original);
    await expectSamePicture(original, out);
    const after = await sharp(out).metadata();
    expect([after.exif, after.xmp, after.width, after.height, after.bitsPerSample]).toEqual([undefined, undefined, 16, 24, 10]);
    await expectNoPersonalMetadata(out);
    expect((await exiftool(out))["QuickTime:TransferCharacteristics"]).toBe("SMPTE ST 2084, ITU BT.2100 PQ");
    // The items are gone from the item structure, not only their bytes.
    expect(out.includes("Exif")).toBe(false);
    expect(out.includes("application/rdf+xml")).toBe(false);
    expect(findBox(out, "iref")).toBeUndefined();
  });

  test("every layout other writers use: idat, metadata before the picture, 64-bit fields, iloc/iinf/infe/ipma versions", async () => {
    const layouts: Partial<AvifSpec>[] = [
      { metadataIn: "idat" },
      { metadataFirst: true, baseOffset: true },
      { ilocVersion: 1, offsetSize: 8, metadataProperty: true },
      { ilocVersion: 2, infeVersion: 3, iinfVersion: 1, ipmaWide: true, metadataProperty: true, largeMdat: true, freeAfterMeta: 24 },
    ];
    for (const layout of layouts) {
      const original = buildAvif(hdr({ exif, xmp: SECRET_XMP, ...layout }));
      expect((await sharp(original).metadata()).exif).toBeDefined();
      const out = strip(original);
      await expectSamePicture(original, out);
      await expectNoPersonalMetadata(out);
      expect((await sharp(out).metadata()).xmp).toBeUndefined();
    }
  });

  test("a sharp-made AVIF with orientation 6, EXIF and XMP keeps its irot and is not re-encoded", async () => {
    const original = await sharp({ create: { width: 30, height: 20, channels: 3, background: "#a36" } })
      .avif({ quality: 60 })
      .withExif(SECRET_EXIF)
      .withMetadata({ orientation: 6 })
      .withXmp(SECRET_XMP)
      .toBuffer();
    const out = strip(original);
    await expectSamePicture(original, out);
    const after = await sharp(out).metadata();
    expect([after.exif, after.xmp, after.width, after.height]).toEqual([undefined, undefined, 20, 30]);
    await expectNoPersonalMetadata(out);
  });

  test("the metadata's bytes are zeroed where they were, in mdat or idat", () => {
    for (const metadataIn of ["mdat", "idat"] as const) {
      const original = buildAvif({ image: image8, exif, xmp: SECRET_XMP, metadataIn });
      const out = strip(original);
      const at = original.indexOf("KuraSecretXmp");
      expect(at).toBeGreaterThan(0);
      expect(out.includes("KuraSecretXmp")).toBe(false);
      expect(out.includes(image8.payload)).toBe(true); // the AV1 payload, byte for byte
      // A top-level free box takes the place the rebuilt meta gave up.
      const metaEnd = 28 + original.readUInt32BE(28);
      expect(out.readUInt32BE(28) + 28).toBeLessThan(metaEnd);
      expect(out.toString("latin1", 28 + out.readUInt32BE(28) + 4, 28 + out.readUInt32BE(28) + 8)).toBe("free");
    }
  });

  test("with the source given over, the edit happens in place and equals the copy", () => {
    const original = buildAvif(hdr({ exif, xmp: SECRET_XMP }));
    const source = Buffer.from(original);
    const copied = stripMetadataBytes(original, "image/avif").bytes;
    const inPlace = stripMetadataBytes(source, "image/avif", true).bytes;
    expect(inPlace).toBe(source);
    expect(inPlace.equals(copied)).toBe(true);
    expect(copied).not.toBe(original);
    expect(original.includes("KuraSecretXmp")).toBe(true); // not reusing: the input is left alone
  });

  test("an animation's user data (udta) is emptied into a free box", () => {
    const still = buildAvif({ image: image8 });
    // A moov with a track whose udta holds a location, as video-derived files carry.
    const box = (type: string, body: Buffer) =>
      Buffer.concat([Buffer.from([0, 0, (8 + body.length) >> 8, (8 + body.length) & 255]), Buffer.from(type, "latin1"), body]);
    const moov = box("moov", box("trak", box("udta", box("\xa9xyz", Buffer.from("+35.6586+139.7454/KuraSecretPlace")))));
    const original = Buffer.concat([still, moov]);
    const out = strip(original);
    expect(out.length).toBe(original.length);
    expect(out.includes("KuraSecretPlace")).toBe(false);
    expect(out.includes("udta")).toBe(false);
    // The still image's boxes untouched (libheif here reads no AVIF sequences, so no decode).
    expect(out.subarray(0, still.length).equals(still)).toBe(true);
    expect(out.subarray(still.length + 8, still.length + 16).toString("latin1", 4)).toBe("trak");
  });
});

describe("AVIF structures the edit refuses, so the upload is re-encoded clean instead", () => {
  test("refused before anything is written, and the re-encode leaves no metadata", async () => {
    const good = buildAvif({ image: image8, exif, xmp: SECRET_XMP });
    const xmpUuid = Buffer.concat([Buffer.from([0, 0, 0, 24 + 13]), Buffer.from("uuid"), Buffer.alloc(16, 0xbe), Buffer.from("KuraSecretXmp")]);
    const refused = [
      Buffer.concat([good, xmpUuid]), // a top-level box the walk does not know (XMP in a uuid box)
      Buffer.concat([good, Buffer.from([0, 0, 0])]), // bytes after the last box
      good.subarray(0, good.length - 5), // cut short: the mdat box runs past the end
    ];
    for (const file of refused) {
      const before = Buffer.from(file);
      expect(() => stripMetadataBytes(file, "image/avif", true)).toThrow(MalformedImageError);
      expect(file.equals(before)).toBe(true);
      expect(stripLosslessly(file, "image/avif")).toBeUndefined();
    }
    const reencoded = await stripMetadataToBuffer(refused[0], "image/avif");
    const meta = await sharp(reencoded).metadata();
    expect([meta.format, meta.exif, meta.xmp]).toEqual(["heif", undefined, undefined]);
    await expectNoPersonalMetadata(reencoded);
  });

  test("a picture that points at the metadata item, or metadata sharing the picture's bytes", () => {
    const original = buildAvif({ image: image8, exif });
    // The cdsc reference turned around: the picture (item 1) now refers to the EXIF item (2).
    const refFrom = original.indexOf(Buffer.from("cdsc")) + 4;
    const turned = Buffer.from(original);
    turned.writeUInt16BE(1, refFrom);
    turned.writeUInt16BE(2, refFrom + 4);
    expect(() => stripMetadataBytes(turned, "image/avif")).toThrow(MalformedImageError);
    // iloc version 0, 4-byte offsets, no base offset: 14-byte entries after a 16-byte head. Point
    // the EXIF item's extent at the picture's first bytes: zeroing it would damage the picture.
    const shared = Buffer.from(original);
    const iloc = findBox(shared, "iloc")!;
    iloc.writeUInt32BE(iloc.readUInt32BE(16 + 6), 16 + 14 + 6);
    expect(() => stripMetadataBytes(shared, "image/avif")).toThrow(MalformedImageError);
  });
});
