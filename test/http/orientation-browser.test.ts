/**
 * EXIF orientation as a real browser shows it (image-fidelity audit LOW-3). Chromium applies a
 * JPEG's orientation and a PNG's eXIf before IDAT, and ignores a late PNG eXIf and a WebP's EXIF
 * chunk (which the container puts after the bitstream; CSS Images 3 ignores late metadata). For
 * each such upload, measured in headless Chromium: Kura's original displays as the uploaded file
 * did, and Kura's reported size, its negotiated answer and a `?w=` variant all show the same
 * orientation. Before, a WebP was reported and thumbnailed rotated while the original was not, and
 * the strip moved a late PNG eXIf to the front, where it began to rotate the picture.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { Browser, Page } from "playwright-core";
import sharp from "sharp";
import { launchBrowser } from "../console/harness";
import { useAdmin } from "../helpers/fixture";
import { useTokenUpload } from "../helpers/token-upload";

const { server, admin } = useAdmin();
const upload = useTokenUpload(server, admin);
let browser: Browser;
let page: Page;

beforeAll(async () => {
  browser = await launchBrowser();
  page = await browser.newPage();
});
afterAll(async () => {
  await browser?.close();
});

/** 640 wide, 960 tall as stored, tagged orientation 6 (rotate 90° to display: 960x640). */
function tagged(format: "jpeg" | "png" | "webp"): Promise<Buffer> {
  const svg = `<svg xmlns="http://www.w3.org/2000/svg" width="640" height="960"><rect width="640" height="960" fill="#3a7"/><rect width="320" height="240" fill="#fff"/></svg>`;
  return sharp(Buffer.from(svg)).toFormat(format).withMetadata({ orientation: 6 }).toBuffer();
}

/** The PNG with its eXIf chunk moved after the image data (valid PNG; browsers then ignore it). */
function withLateExif(png: Buffer): Buffer {
  const chunks: Buffer[] = [];
  let exif: Buffer | undefined;
  for (let pos = 8; pos < png.length; ) {
    const end = pos + 12 + png.readUInt32BE(pos);
    const chunk = png.subarray(pos, end);
    if (chunk.toString("latin1", 4, 8) === "eXIf") exif = chunk;
    else chunks.push(chunk);
    pos = end;
  }
  if (!exif) throw new Error("no eXIf to move");
  const iend = chunks.pop()!;
  return Buffer.concat([png.subarray(0, 8), ...chunks, exif, iend]);
}

/** [naturalWidth, naturalHeight] of an image as Chromium decodes and orients it. */
function shown(src: string): Promise<[number, number]> {
  return page.evaluate(async (url) => {
    const img = new Image();
    img.src = url;
    await img.decode();
    return [img.naturalWidth, img.naturalHeight] as [number, number];
  }, src);
}

/** Label, bytes, file name, format, and what Chromium shows (the premise, checked too). */
const cases: Array<[string, () => Promise<Buffer>, string, string, [number, number]]> = [
  ["JPEG", () => tagged("jpeg"), "o6.jpg", "jpeg", [960, 640]],
  ["PNG, eXIf before the image data", () => tagged("png"), "o6.png", "png", [960, 640]],
  ["PNG, eXIf after the image data", async () => withLateExif(await tagged("png")), "late.png", "png", [640, 960]],
  ["WebP (EXIF after the bitstream)", () => tagged("webp"), "o6.webp", "webp", [640, 960]],
];

describe("orientation as Chromium shows it", () => {
  for (const [label, make, name, format, display] of cases) {
    test(label, async () => {
      const bytes = await make();
      const mime = format === "jpeg" ? "image/jpeg" : `image/${format}`;
      const asUploaded = await shown(`data:${mime};base64,${bytes.toString("base64")}`);
      expect(asUploaded).toEqual(display);
      expect(bytes.includes(Buffer.from("Exif\0\0")) || bytes.includes(Buffer.from("eXIf"))).toBe(true); // the tag is really in the file
      const image = await upload(bytes, name);
      // The stored original (explicitly in its own format: no negotiation) looks as the upload did.
      expect(await shown(server.url(`/i/${image.id}?format=${format}`))).toEqual(asUploaded);
      // Kura's size, its default answer for a browser and a resized variant agree with it.
      expect([image.width, image.height]).toEqual(asUploaded);
      expect(await shown(server.url(`/i/${image.id}`))).toEqual(asUploaded);
      const [w, h] = await shown(server.url(`/i/${image.id}?w=320`));
      expect([w, h]).toEqual([320, Math.round((320 * asUploaded[1]) / asUploaded[0])]);
    }, 30_000);
  }
});
