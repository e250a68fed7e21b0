// Black box, audit 13 (HIGH-2, MED-1, LOW-4): an upload through the token API under the default
// exif_policy (strip) keeps what the picture needs and loses what identifies people, read back
// as the stored original from /i/<id>:
//  - an AVIF without EXIF/XMP is stored byte for byte (nclx, 10 bits, HDR light levels intact);
//    one with them loses only the items, in memory and through the temp-file path;
//  - an Ultra HDR JPEG keeps its gain map: the same HDR rendition, no EXIF/GPS;
//  - a camera's Adobe RGB JPEG (EXIF InteropIndex R03) keeps that marking, not the camera or GPS.
import { beforeAll, describe, expect, test } from "bun:test";
import sharp from "sharp";
import { adminSession } from "../helpers/client";
import { useServer } from "../helpers/fixture";
import { av1Image, buildAvif, findBox } from "../helpers/avif";
import { hdrRendition, primaryOnly, ultraHdr } from "../helpers/gainmap";
import { form, sha256 } from "../helpers/images";
import { expectNoPersonalMetadata, exiftool, exiftoolWrite, SECRET_XMP, secretExif } from "../helpers/metadata";

describe("exif_policy=strip (the default) keeps the picture", () => {
  const { server } = useServer();
  let token: string;
  beforeAll(async () => {
    const admin = await adminSession(server);
    token = (await admin.json("POST", "/api/admin/tokens", { name: "fidelity" }, 201)).token;
  });

  /** Uploads with no exif_policy field and returns the stored original as /i/ serves it (no Accept: no negotiation). */
  async function roundTrip(bytes: Buffer, name: string): Promise<Buffer> {
    const res = await fetch(server.url("/api/upload"), { method: "POST", headers: { authorization: `Bearer ${token}` }, body: form(bytes, name) });
    expect(res.status).toBe(200);
    const { id } = await res.json();
    const got = await fetch(server.url(`/i/${id}`));
    expect(got.status).toBe(200);
    return Buffer.from(await got.arrayBuffer());
  }

  test("AVIF: none of the picture's signalling lost, only EXIF and XMP removed", async () => {
    const image = await av1Image(24, 16, 10);
    const hdr = { image, nclx: [9, 16, 9, true] as [number, number, number, boolean], clli: [1000, 400] as [number, number], mdcv: true, irot: 1 };
    const plain = buildAvif(hdr);
    const stored = await roundTrip(plain, "hdr.avif");
    expect(sha256(stored)).toBe(sha256(plain)); // byte for byte

    const exif = await secretExif();
    // The second is over the in-memory limit (4 MiB) through a top-level free box: the temp-file path.
    for (const freeAfterMeta of [undefined, 4.5 * 1024 * 1024]) {
      const tagged = buildAvif({ ...hdr, exif, xmp: SECRET_XMP, freeAfterMeta });
      const out = await roundTrip(tagged, "tagged.avif");
      expect(out.length).toBe(tagged.length);
      await expectNoPersonalMetadata(out);
      const [meta, before, after] = [await sharp(out).metadata(), await exiftool(tagged), await exiftool(out)];
      expect([meta.exif, meta.xmp, meta.bitsPerSample, meta.width, meta.height]).toEqual([undefined, undefined, 10, 16, 24]);
      for (const tag of ["QuickTime:ColorPrimaries", "QuickTime:TransferCharacteristics", "QuickTime:Rotation"]) expect(after[tag]).toEqual(before[tag]);
      for (const box of ["colr", "pixi", "clli", "mdcv", "irot"]) expect(findBox(out, box)!.equals(findBox(tagged, box)!)).toBe(true);
      expect((await sharp(out).raw().toBuffer()).equals(await sharp(tagged).raw().toBuffer())).toBe(true);
    }
  });

  test("Ultra HDR JPEG: the gain map and its index kept, the same HDR rendition, no EXIF or GPS", async () => {
    const original = await ultraHdr(true);
    expect((await exiftool(original))["GPS:GPSLatitude"]).toBeDefined();
    const out = await roundTrip(original, "hdr.jpg");
    await expectNoPersonalMetadata(out);
    expect((await sharp(out).metadata()).gainMap).toBeDefined();
    const tags = await exiftool(out);
    expect(tags["MPF0:NumberOfImages"]).toBe(2);
    expect(out.readUInt16BE(tags["MPImage2:MPImageStart"] as number)).toBe(0xffd8);
    const [before, after, sdr] = await Promise.all([hdrRendition(original), hdrRendition(out), hdrRendition(primaryOnly(out))]);
    expect(after.equals(before)).toBe(true);
    expect(after.equals(sdr)).toBe(false);
  });

  test("Adobe RGB marked only by EXIF (R03): ColorSpace and InteropIndex kept, camera and GPS gone", async () => {
    const made = await sharp({ create: { width: 40, height: 30, channels: 3, background: "#2a8" } })
      .jpeg()
      .toBuffer();
    const original = await exiftoolWrite(made, ["-ColorSpace#=65535", "-InteropIndex=R03", "-Make=KuraCam", "-GPSLatitude=35.6", "-GPSLatitudeRef=N"]);
    const out = await roundTrip(original, "adobe.jpg");
    const tags = await exiftool(out);
    expect([tags["ExifIFD:ColorSpace"], tags["InteropIFD:InteropIndex"]]).toEqual(["Uncalibrated", "R03 - DCF option file (Adobe RGB)"]);
    await expectNoPersonalMetadata(out, [/^ExifIFD:ColorSpace$/, /^InteropIFD:InteropIndex$/]);
  });
});
