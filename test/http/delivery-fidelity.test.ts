/**
 * What a render could only make worse is answered with the stored file (image-fidelity audit 13):
 * - an APNG keeps its animation in every browser: never negotiated to WebP, `?w=` and `?format=png` are the file;
 * - an image over libwebp's 16383 px is not negotiated to WebP (the failed render's fallback was uncacheable);
 * - `?w=` at or above the stored width is the original (or the one full-size WebP), not a same-size re-encode.
 */
import { describe, expect, test } from "bun:test";
import sharp from "sharp";
import { isAnimatedPng } from "../../src/images/sniff";
import { useAdmin } from "../helpers/fixture";
import { useTokenUpload } from "../helpers/token-upload";
import { form, makeApng, makeJpeg, makePng } from "../helpers/images";

const CHROME = "image/avif,image/webp,image/apng,image/svg+xml,image/*,*/*;q=0.8";

const { server, admin } = useAdmin();
const upload = useTokenUpload(server, admin);

const get = (path: string, accept = CHROME) => fetch(server.url(path), { headers: { accept } });

describe("APNG", () => {
  test("stored as image/apng; the default link, ?w= and ?format=png are the animated file for a browser; an explicit other format is a still", async () => {
    const apng = await makeApng(400, 300, 3);
    const image = await upload(apng, "anim.png");
    expect(image.mime).toBe("image/apng");
    for (const path of [`/i/${image.id}`, `/i/${image.id}.png`, `/i/${image.id}?w=320`, `/i/${image.id}?format=png&w=320`]) {
      const res = await get(path);
      const bytes = new Uint8Array(await res.arrayBuffer());
      expect([path, res.status, res.headers.get("content-type"), isAnimatedPng(bytes.subarray(0, 4096))]).toEqual([path, 200, "image/apng", true]);
      expect(res.headers.get("vary")).toBeNull();
      expect(res.headers.get("cache-control")).not.toBe("no-store");
    }
    const webp = await get(`/i/${image.id}?format=webp`);
    expect([webp.status, webp.headers.get("content-type")]).toEqual([200, "image/webp"]);
  });

  test("a still PNG is still negotiated to WebP", async () => {
    const image = await upload(await makePng(40, 30, 9), "still.png");
    expect(image.mime).toBe("image/png");
    const res = await get(`/i/${image.id}`);
    expect([res.headers.get("content-type"), res.headers.get("vary")]).toEqual(["image/webp", "Accept"]);
  });
});

test("wider than 16383 px: a browser gets the cacheable original, not an uncacheable fallback after a failed WebP", async () => {
  const wide = await sharp({ create: { width: 17000, height: 40, channels: 3, background: "#3a7" } })
    .jpeg()
    .toBuffer();
  const image = await upload(wide, "pano.jpg");
  const res = await get(`/i/${image.id}`);
  expect([res.status, res.headers.get("content-type")]).toEqual([200, "image/jpeg"]);
  expect(res.headers.get("etag")).toMatch(/^"[0-9a-f]{64}"$/);
  expect(res.headers.get("cache-control")).toContain("max-age");
  // Scaled below the limit it is negotiated again.
  expect((await get(`/i/${image.id}?w=320`)).headers.get("content-type")).toBe("image/webp");
  expect(server.logs).not.toMatch(/图片处理失败/);
});

test("?w= at or above the stored width is the original (stored format) or the one full-size WebP (negotiated)", async () => {
  const jpeg = await makeJpeg(640, 400, 21);
  const image = await upload(jpeg, "w.jpg");
  const original = await get(`/i/${image.id}`, "image/jpeg");
  for (const w of [640, 1920]) {
    const res = await get(`/i/${image.id}?w=${w}`, "image/jpeg");
    expect([w, res.headers.get("etag"), Buffer.from(await res.arrayBuffer()).equals(jpeg)]).toEqual([w, original.headers.get("etag"), true]);
  }
  const full = await get(`/i/${image.id}`);
  expect((await get(`/i/${image.id}?w=1920`)).headers.get("etag")).toBe(full.headers.get("etag"));
  expect((await get(`/i/${image.id}?w=320`)).headers.get("etag")).not.toBe(full.headers.get("etag"));
});

test("an animated AVIF (image sequence, which libvips cannot open) is refused as unsupported, not as damaged", async () => {
  // test/fixtures/animated.avif: 4 frames, 400x300, made by libavif's avifenc from a y4m (image-fidelity audit LOW-2).
  const bytes = new Uint8Array(await Bun.file(new URL("../fixtures/animated.avif", import.meta.url)).arrayBuffer());
  const refused = await admin.json("POST", "/api/admin/upload", form(bytes, "anim.avif"), 415);
  expect(refused.error).toMatch(/^不支持动画 AVIF/);
});
