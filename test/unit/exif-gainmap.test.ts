// exif_policy=strip on HDR gain-map JPEGs (audit 13 MED-1): the gain map after the primary's EOI,
// the MPF index that points to it and the gain-map metadata (ISO 21496-1 segments, the hdrgm part
// of XMP) survive, so an HDR display shows the same HDR picture; EXIF, GPS and every other XMP
// namespace go, in the gain-map image too.
import { beforeAll, describe, expect, test } from "bun:test";
import sharp from "sharp";
import { hdrgmXmp, readMpf } from "../../src/images/exif-gainmap";
import { stripMetadataBytes } from "../../src/images/exif";
import { GAIN_MAP_XMP, googlePrimaryXmp, hdrRendition, ISO_ID, jpegSegment, primaryOnly, reassemble, ultraHdr, xmpSegment } from "../helpers/gainmap";
import { expectNoPersonalMetadata, exiftool, secretExif } from "../helpers/metadata";

let made: Buffer;
let exifSegment: Buffer;
beforeAll(async () => {
  made = await ultraHdr(true);
  exifSegment = jpegSegment(0xe1, await secretExif());
});

const strip = (b: Buffer) => stripMetadataBytes(Buffer.from(b), "image/jpeg").bytes;
const HDRGM = [/^XMP-hdrgm:/];
const occurrences = (b: Buffer, s: string) => b.toString("latin1").split(s).length - 1;

/** The same HDR picture as `original` (gain map applied), which the SDR primary alone is not. */
async function expectSameHdr(original: Buffer, out: Buffer) {
  const [before, after, sdrOnly] = await Promise.all([hdrRendition(original), hdrRendition(out), hdrRendition(primaryOnly(out))]);
  expect(after.equals(before)).toBe(true);
  expect(after.equals(sdrOnly)).toBe(false);
  expect((await sharp(out).metadata()).gainMap).toBeDefined();
  // The index points exactly at the gain-map image, whose size it states.
  const tags = await exiftool(out);
  expect(tags["MPF0:NumberOfImages"]).toBe(2);
  const start = tags["MPImage2:MPImageStart"] as number;
  expect(out.readUInt16BE(start)).toBe(0xffd8);
  expect(start + (tags["MPImage2:MPImageLength"] as number)).toBe(out.length);
  expect(tags["MPImage1:MPImageLength"]).toBe(start);
}

describe("Ultra HDR JPEG (ISO 21496-1 and MPF, as libultrahdr writes it)", () => {
  test("keeps the gain map and its metadata, drops EXIF with GPS", async () => {
    expect((await exiftool(made))["GPS:GPSLatitude"]).toBeDefined();
    const out = strip(made);
    await expectSameHdr(made, out);
    await expectNoPersonalMetadata(out);
    expect((await sharp(out).metadata()).exif).toBeUndefined();
    expect(occurrences(out, ISO_ID)).toBe(2); // the primary's version segment and the gain map's parameters
  });

  test("EXIF and XMP inside the gain-map image are removed too, junk after it is dropped", async () => {
    const original = reassemble(made, {
      secondary: [exifSegment, xmpSegment(GAIN_MAP_XMP.replace("hdrgm:Version", "hdrgm:Foo"))],
      trailer: Buffer.from("KuraSecretTrailer"),
    });
    expect(occurrences(original, "KuraCam")).toBe(2);
    const out = strip(original);
    await expectSameHdr(original, out);
    await expectNoPersonalMetadata(out);
    expect(out.includes("http://ns.adobe.com/xap/1.0/")).toBe(false); // no hdrgm:Version: not a gain-map description
  });

  test("orientation 6 is written back before the index, whose offsets follow the shift", async () => {
    const rotated = Buffer.from(made);
    // sharp's EXIF is little-endian; its Orientation entry is 12 01 03 00 01 00 00 00 <value>.
    const entry = rotated.indexOf(Buffer.from([0x12, 0x01, 0x03, 0x00, 0x01, 0x00, 0x00, 0x00]));
    rotated.writeUInt16LE(6, entry + 8);
    expect((await sharp(rotated).metadata()).orientation).toBe(6);
    const out = strip(rotated);
    expect((await sharp(out).metadata()).orientation).toBe(6);
    expect((await exiftool(out))["IFD0:Make"]).toBeUndefined();
    await expectSameHdr(rotated, out);
  });
});

describe("Google's Ultra HDR XMP (hdrgm namespace)", () => {
  const layout = (noIso: boolean) =>
    reassemble(made, {
      noIso,
      primary: [xmpSegment(googlePrimaryXmp(1234))],
      secondary: [exifSegment, xmpSegment(GAIN_MAP_XMP)],
    });

  for (const noIso of [true, false]) {
    test(`XMP reduced to hdrgm in both images, the HDR picture the same${noIso ? " (XMP only, no ISO segments)" : " (with ISO segments)"}`, async () => {
      const original = layout(noIso);
      const out = strip(original);
      await expectSameHdr(original, out);
      await expectNoPersonalMetadata(out, HDRGM);
      const tags = await exiftool(out);
      expect(String(tags["XMP-hdrgm:Version"])).toBe("1"); // "1.0", read by exiftool -j as a number
      expect(Object.keys(tags).filter((k) => k.startsWith("XMP-") && !k.startsWith("XMP-hdrgm:"))).toEqual([]);
      expect(out.includes("Container:Directory")).toBe(false);
      // The gain map's own packet keeps all nine parameters, and nothing else.
      const gainMap = out.subarray(tags["MPImage2:MPImageStart"] as number);
      const second = await exiftool(gainMap);
      expect(
        Object.keys(second)
          .filter((k) => k.startsWith("XMP-"))
          .sort(),
      ).toEqual(
        ["BaseRenditionIsHDR", "GainMapMax", "GainMapMin", "Gamma", "HDRCapacityMax", "HDRCapacityMin", "OffsetHDR", "OffsetSDR", "Version"].map(
          (n) => `XMP-hdrgm:${n}`,
        ),
      );
      expect(second["XMP-hdrgm:GainMapMax"]).toBe(2.5);
      expect(personalIn(second)).toEqual([]);
    });
  }
});
const personalIn = (tags: Record<string, unknown>) => Object.keys(tags).filter((k) => /^(IFD0|ExifIFD|GPS|XMP-dc|XMP-exif):/.test(k));

describe("what is not a gain map is dropped as before", () => {
  test("another image in the MPF index (a camera preview) is dropped and the index lists two", async () => {
    const preview = await sharp({ create: { width: 16, height: 8, channels: 3, background: "#0f0" } })
      .jpeg()
      .toBuffer();
    const original = reassemble(made, { extraImage: preview });
    expect((await exiftool(original))["MPF0:NumberOfImages"]).toBe(3);
    const out = strip(original);
    await expectSameHdr(original, out);
    expect(out.includes(preview)).toBe(false);
  });

  test("an index that points nowhere keeps the SDR primary only, with no gain-map segments left", async () => {
    const broken = Buffer.from(made);
    const mpfTiff = broken.indexOf("MPF\0") + 4;
    broken.writeUInt32BE(broken.length * 2, mpfTiff + 50 + 16 + 8); // libultrahdr's index: big-endian, list at +50
    const out = strip(broken);
    expect(out.equals(strip(primaryOnly(made)))).toBe(true);
    expect(out.includes(ISO_ID)).toBe(false);
    expect(out.includes("MPF\0")).toBe(false);
    expect((await sharp(out).metadata()).gainMap).toBeUndefined();
  });

  test("an Ultra HDR file with nothing to strip comes back as the very same buffer", async () => {
    const plain = await ultraHdr(false);
    const trimmed = stripMetadataBytes(plain, "image/jpeg").bytes;
    // libultrahdr's gain map carries a COM segment ("Source: google libuhdr …"), dropped like every COM.
    const again = stripMetadataBytes(trimmed, "image/jpeg").bytes;
    expect(again).toBe(trimmed);
    await expectSameHdr(plain, trimmed);
  });
});

describe("hdrgmXmp and readMpf", () => {
  const packet = (inner: string) =>
    Buffer.from(
      `http://ns.adobe.com/xap/1.0/\0<x:xmpmeta><rdf:RDF><rdf:Description xmlns:hdrgm="http://ns.adobe.com/hdr-gain-map/1.0/" ${inner}</rdf:RDF></x:xmpmeta>`,
    );
  test("keeps whitelisted names with numeric values, per-channel sequences, nothing else", () => {
    const out = hdrgmXmp(
      packet(
        `hdrgm:Version="1.0" hdrgm:Gamma="1" hdrgm:GainMapMin="KuraSecret" hdrgm:Owner="2"><hdrgm:GainMapMax><rdf:Seq><rdf:li>2.5</rdf:li><rdf:li>2</rdf:li><rdf:li>1e1</rdf:li></rdf:Seq></hdrgm:GainMapMax><hdrgm:OffsetSDR> 0.5 </hdrgm:OffsetSDR><dc:creator>KuraSecret</dc:creator></rdf:Description>`,
      ),
    )!.toString();
    expect(out).toContain('hdrgm:Version="1.0" hdrgm:Gamma="1" hdrgm:OffsetSDR="0.5"');
    expect(out).toContain("<hdrgm:GainMapMax><rdf:Seq><rdf:li>2.5</rdf:li><rdf:li>2</rdf:li><rdf:li>1e1</rdf:li></rdf:Seq></hdrgm:GainMapMax>");
    expect(out).not.toContain("KuraSecret");
    expect(out).not.toContain("Owner");
    expect(out).not.toContain("GainMapMin");
  });

  test("no hdrgm:Version, or the prefix bound to another namespace: nothing kept", () => {
    expect(hdrgmXmp(packet(`hdrgm:Gamma="1"/>`))).toBeUndefined();
    const other = Buffer.from(`http://ns.adobe.com/xap/1.0/\0<rdf:Description xmlns:hdrgm="http://example.com/" hdrgm:Version="1.0"/>`);
    expect(hdrgmXmp(other)).toBeUndefined();
  });

  test("readMpf reads both byte orders and refuses lists that do not fit", () => {
    const bigEndian = made.subarray(made.indexOf("MPF\0"));
    expect(readMpf(bigEndian)?.map((i) => i.offset)[0]).toBe(0);
    expect(readMpf(bigEndian)?.length).toBe(2);
    const little = reassemble(made, {});
    expect(readMpf(little.subarray(little.indexOf("MPF\0")))?.length).toBe(2);
    expect(readMpf(bigEndian.subarray(0, 40))).toBeUndefined();
  });
});
