// Planted personal metadata and the checks that none of it survived a strip, read by sharp and
// by exiftool (which knows far more places to look than sharp: every IFD, XMP namespace, MPF
// image, HEIF item and QuickTime user-data box).
import { expect } from "bun:test";
import sharp from "sharp";
import { exiftool } from "./exiftool";

export { exiftool, exiftoolWrite } from "./exiftool";

export const SECRET_XMP = `<x:xmpmeta xmlns:x="adobe:ns:meta/"><rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#"><rdf:Description rdf:about="" xmlns:dc="http://purl.org/dc/elements/1.1/" xmlns:exif="http://ns.adobe.com/exif/1.0/" exif:GPSLatitude="35,40.2N"><dc:creator>KuraSecretXmp</dc:creator></rdf:Description></rdf:RDF></x:xmpmeta>`;
export const SECRET_EXIF = {
  IFD0: { Make: "KuraCam", Model: "KuraModel" },
  IFD3: { GPSLatitudeRef: "N", GPSLatitude: "35/1 40/1 12/1", GPSLongitudeRef: "E", GPSLongitude: "139/1 45/1 30/1" },
};
/** Strings that must not be found anywhere in a stripped file. */
export const SECRET_STRINGS = ["KuraCam", "KuraModel", "KuraSecret"];

/** EXIF ("Exif\0\0" + TIFF) with camera and GPS tags, as sharp writes it. */
export async function secretExif(): Promise<Buffer> {
  const jpeg = await sharp({ create: { width: 4, height: 4, channels: 3, background: "#000" } })
    .jpeg()
    .withExif(SECRET_EXIF)
    .toBuffer();
  return (await sharp(jpeg).metadata()).exif!;
}

/** Tags of metadata that may identify a person, a place or a device (EXIF, GPS, XMP, IPTC, maker notes), except `allowed`. */
export function personalTags(tags: Record<string, unknown>, allowed: RegExp[] = []): string[] {
  return Object.keys(tags).filter(
    (key) =>
      /^(IFD0|IFD1|ExifIFD|GPS|InteropIFD|XMP-[\w-]+|XMP|IPTC|MakerNotes|Photoshop|UserData|Keys|ItemList):|GPS/.test(key) && !allowed.some((a) => a.test(key)),
  );
}

/** No planted string anywhere, no IPTC for sharp, no personal tag for exiftool but `allowed`. */
export async function expectNoPersonalMetadata(bytes: Buffer, allowed: RegExp[] = []) {
  for (const s of SECRET_STRINGS) expect(bytes.includes(s)).toBe(false);
  expect((await sharp(bytes).metadata()).iptc).toBeUndefined();
  expect(personalTags(await exiftool(bytes), allowed)).toEqual([]);
}
