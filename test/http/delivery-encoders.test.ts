/**
 * What the encoders make of what was uploaded (image-fidelity audit 13, MED-3, LOW-1, LOW-4):
 * - a negotiated WebP that is no smaller than the stored file is not served: the original is;
 * - a PNG source's WebP is lossless whenever that is the smaller (screenshots, diagrams, pixel art);
 * - a PNG variant keeps its source's palette, 16-bit samples and grey channels;
 * - a variant's strong ETag names its render settings: new settings, new tag.
 */
import { describe, expect, test } from "bun:test";
import sharp from "sharp";
import { useAdmin } from "../helpers/fixture";
import { useTokenUpload } from "../helpers/token-upload";
import { sha256 } from "../helpers/images";

const CHROME = "image/avif,image/webp,image/apng,image/svg+xml,image/*,*/*;q=0.8";
const NO_WEBP = "image/png,image/*;q=0.8";

const { server, admin } = useAdmin();
const upload = useTokenUpload(server, admin);

async function get(path: string, accept = CHROME, extra: Record<string, string> = {}) {
  const res = await fetch(server.url(path), { headers: { accept, ...extra } });
  return { res, bytes: Buffer.from(await res.arrayBuffer()) };
}

/** A chat-app JPEG: already compressed hard, so a WebP at quality 80 of it comes out bigger. */
/** Blurred noise: compresses like a photo (no flat areas, no hard edges). */
function photoLike(width = 640, height = 480, blur = 1.2, sigma = 40) {
  const noise = sharp({ create: { width, height, channels: 3, background: "#808080", noise: { type: "gaussian", mean: 128, sigma } } });
  return blur > 0 ? noise.blur(blur) : noise;
}

function lowQualityJpeg(): Promise<Buffer> {
  return photoLike().jpeg({ quality: 40, mozjpeg: true }).toBuffer();
}

/** A screenshot-like PNG: flat fills and one-pixel coloured lines (what 4:2:0 lossy WebP smears). */
function screenshotPng(): Promise<Buffer> {
  const lines = Array.from(
    { length: 40 },
    (_, i) => `<rect x="20" y="${60 + i * 9}" width="${200 + ((i * 37) % 300)}" height="1" fill="${i % 2 ? "#e00" : "#03c"}"/>`,
  );
  const svg = `<svg xmlns="http://www.w3.org/2000/svg" width="640" height="480"><rect width="640" height="480" fill="#f4f4f4"/><rect width="640" height="40" fill="#2d2d30"/>${lines.join("")}</svg>`;
  return sharp(Buffer.from(svg)).png().toBuffer();
}

async function rawPixels(bytes: Buffer): Promise<Buffer> {
  return sharp(bytes).ensureAlpha().raw().toBuffer();
}

describe("a negotiated WebP is served only when smaller than the stored file", () => {
  test("an already hard-compressed JPEG: the browser gets the cacheable original (Vary: Accept); an explicit ?format=webp still gets WebP", async () => {
    const jpeg = await lowQualityJpeg();
    const image = await upload(jpeg, "chat.jpg");
    // Twice: the render on the first request (the cold path), the cached variant's size on the second.
    for (let i = 0; i < 2; i++) {
      const { res, bytes } = await get(`/i/${image.id}`);
      expect([res.status, res.headers.get("content-type"), bytes.length]).toEqual([200, "image/jpeg", image.size]);
      expect(res.headers.get("etag")).toBe(`"${image.sha256}"`);
      expect(res.headers.get("vary")).toBe("Accept");
      expect(res.headers.get("cache-control")).toBe("public, max-age=31536000, immutable");
      expect(sha256(bytes)).toBe(image.sha256);
    }
    const explicit = await get(`/i/${image.id}?format=webp`);
    expect(explicit.res.headers.get("content-type")).toBe("image/webp");
    expect(explicit.bytes.length).toBeGreaterThanOrEqual(image.size); // the premise: WebP would be bigger
    const head = await fetch(server.url(`/i/${image.id}`), { method: "HEAD", headers: { accept: CHROME } });
    expect([head.headers.get("content-type"), head.headers.get("content-length")]).toEqual(["image/jpeg", String(image.size)]);
    const revalidated = await get(`/i/${image.id}`, CHROME, { "if-none-match": `"${image.sha256}"` });
    expect(revalidated.res.status).toBe(304);
  });

  test("only a format-only negotiation falls back: a width asked for is a resize, WebP whatever its size", async () => {
    const image = await upload(await photoLike(1280, 960).jpeg({ quality: 20, mozjpeg: true }).toBuffer(), "small-file.jpg");
    const { res, bytes } = await get(`/i/${image.id}?w=960`);
    expect([res.status, res.headers.get("content-type"), res.headers.get("vary")]).toEqual([200, "image/webp", "Accept"]);
    expect(bytes.length).toBeGreaterThan(image.size); // the premise: this WebP is bigger than the whole original
    expect((await sharp(bytes).metadata()).width).toBe(960);
  });

  test("a JPEG whose WebP is smaller still gets the WebP", async () => {
    const photo = await photoLike().jpeg({ quality: 95 }).toBuffer();
    const image = await upload(photo, "photo.jpg");
    const { res, bytes } = await get(`/i/${image.id}`);
    expect(res.headers.get("content-type")).toBe("image/webp");
    expect(bytes.length).toBeLessThan(image.size);
  });
});

describe("a PNG source's WebP", () => {
  test("a screenshot is negotiated to a lossless WebP: the same pixels, a fraction of the bytes", async () => {
    const png = await screenshotPng();
    const image = await upload(png, "shot.png");
    const { res, bytes } = await get(`/i/${image.id}`);
    expect(res.headers.get("content-type")).toBe("image/webp");
    expect(bytes.length).toBeLessThan(image.size);
    expect((await rawPixels(bytes)).equals(await rawPixels(png))).toBe(true);
  });

  test("a photo kept as PNG is negotiated to the (much smaller) lossy WebP", async () => {
    const photo = await photoLike(480, 360, 1.5).png().toBuffer();
    const image = await upload(photo, "photo.png");
    const { res, bytes } = await get(`/i/${image.id}`);
    expect(res.headers.get("content-type")).toBe("image/webp");
    expect(bytes.length).toBeLessThan(image.size / 3);
    expect((await rawPixels(bytes)).equals(await rawPixels(photo))).toBe(false);
  });
});

describe("a PNG variant keeps what its source was", () => {
  test("a 16-colour palette PNG resized is a palette PNG of at most 16 colours", async () => {
    const colours = ["#000", "#fff", "#e00", "#0a0", "#00e", "#ee0", "#0ee", "#e0e"];
    const cells = colours.flatMap((_, i) => colours.map((_, j) => `<rect x="${i * 80}" y="${j * 80}" width="80" height="80" fill="${colours[(i + j) % 8]}"/>`));
    const svg = `<svg xmlns="http://www.w3.org/2000/svg" width="640" height="640">${cells.join("")}</svg>`;
    const png = await sharp(Buffer.from(svg)).png({ palette: true, colours: 16, dither: 0 }).toBuffer();
    const source = await sharp(png).metadata();
    expect([source.isPalette, source.bitsPerSample]).toEqual([true, 4]);
    const image = await upload(png, "pixels.png");
    const { res, bytes } = await get(`/i/${image.id}?w=320`, NO_WEBP);
    expect(res.headers.get("content-type")).toBe("image/png");
    const meta = await sharp(bytes).metadata();
    expect([meta.width, meta.isPalette]).toEqual([320, true]);
    expect(meta.bitsPerSample).toBeLessThanOrEqual(4);
  });

  test("a 16-bit PNG resized stays 16-bit", async () => {
    const png = await photoLike(640, 100, 0, 30).toColourspace("rgb16").png().toBuffer();
    expect((await sharp(png).metadata()).depth).toBe("ushort");
    const image = await upload(png, "deep.png");
    const { bytes } = await get(`/i/${image.id}?w=320`, NO_WEBP);
    const meta = await sharp(bytes).metadata();
    expect([meta.format, meta.width, meta.depth]).toEqual(["png", 320, "ushort"]);
  });

  test("a grey+alpha PNG resized stays grey+alpha (two channels, not RGBA)", async () => {
    const width = 640;
    const height = 100;
    const raw = Buffer.alloc(width * height * 2);
    for (let i = 0; i < width * height; i++) {
      raw[i * 2] = (i * 7) % 256;
      raw[i * 2 + 1] = i % width < 100 ? 255 : 128;
    }
    const png = await sharp(raw, { raw: { width, height, channels: 2 } })
      .toColourspace("b-w")
      .png()
      .toBuffer();
    expect((await sharp(png).metadata()).channels).toBe(2);
    const image = await upload(png, "grey.png");
    const { bytes } = await get(`/i/${image.id}?w=320`, NO_WEBP);
    const meta = await sharp(bytes).metadata();
    expect([meta.format, meta.width, meta.channels, meta.space]).toEqual(["png", 320, 2, "b-w"]);
  });
});

test("a variant's ETag names its render settings: after a quality change the tag is new, and the old one gets the new bytes, not a 304", async () => {
  const photo = await photoLike(640, 480, 1).jpeg({ quality: 95 }).toBuffer();
  const image = await upload(photo, "q.jpg");
  const before = await get(`/i/${image.id}?w=320`, NO_WEBP);
  const oldTag = before.res.headers.get("etag")!;
  expect(oldTag).toMatch(new RegExp(`^"${image.sha256}-320-jpeg-[0-9a-z]+"$`));
  await admin.json("PUT", "/api/admin/config", { process_quality_jpeg: 30 });
  try {
    const after = await get(`/i/${image.id}?w=320`, NO_WEBP);
    const newTag = after.res.headers.get("etag")!;
    expect(newTag).not.toBe(oldTag);
    expect(after.bytes.length).toBeLessThan(before.bytes.length); // really rendered at the new quality
    const stale = await get(`/i/${image.id}?w=320`, NO_WEBP, { "if-none-match": oldTag });
    expect([stale.res.status, stale.res.headers.get("etag")]).toEqual([200, newTag]);
    expect(stale.bytes.equals(after.bytes)).toBe(true);
    expect((await get(`/i/${image.id}?w=320`, NO_WEBP, { "if-none-match": newTag })).res.status).toBe(304);
  } finally {
    await admin.json("PUT", "/api/admin/config", { process_quality_jpeg: 82 });
  }
});
