import { describe, expect, test } from "bun:test";
import sharp from "sharp";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ProcessingAbortedError, ProcessingTimeoutError, renderVariant, type RenderOptions } from "../../src/delivery/transform.ts";
import { makeAnimated, makeJpeg, makePng } from "../helpers/images.ts";

const base = { quality: { webp: 80, jpeg: 82 }, webpMethod: 4 } as const;
const opts = (o: Partial<RenderOptions> & Pick<RenderOptions, "width" | "format">): RenderOptions => ({ ...base, ...o });

describe("renderVariant", () => {
  test("resizes a JPEG file into WebP with the aspect ratio kept", async () => {
    const dir = mkdtempSync(join(tmpdir(), "kura-transform-"));
    try {
      const file = join(dir, "in.jpg");
      writeFileSync(file, await makeJpeg(800, 600));
      const out = await renderVariant(file, opts({ width: 320, format: "webp" }));
      const m = await sharp(out).metadata();
      expect([m.format, m.width, m.height]).toEqual(["webp", 320, 240]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test("never upscales past the original width", async () => {
    const out = await renderVariant(await makePng(200, 100), opts({ width: 1280, format: "png" }));
    const m = await sharp(out).metadata();
    expect([m.format, m.width, m.height]).toEqual(["png", 200, 100]);
  });

  test("width 0 converts without resizing; every output format encodes", async () => {
    const input = await makeJpeg(120, 80);
    for (const format of ["webp", "jpeg", "png", "avif", "gif"] as const) {
      const m = await sharp(await renderVariant(input, opts({ width: 0, format }))).metadata();
      expect(m.format).toBe(format === "avif" ? "heif" : format);
      expect([m.width, m.height]).toEqual([120, 80]);
    }
  });

  test("applies EXIF orientation and drops metadata", async () => {
    const input = await makeJpeg(64, 48, 1, { orientation: 6, exif: { IFD0: { Copyright: "secret-owner" } } });
    expect((await sharp(input).metadata()).exif).toBeDefined();
    expect(input.includes(Buffer.from("secret-owner"))).toBe(true);
    const out = await renderVariant(input, opts({ width: 0, format: "jpeg" }));
    const m = await sharp(out).metadata();
    expect([m.width, m.height]).toEqual([48, 64]); // rotated into the pixels
    expect(m.exif).toBeUndefined();
    expect(m.orientation).toBeUndefined();
    expect(out.includes(Buffer.from("secret-owner"))).toBe(false);
  });

  test("transparent PNG → JPEG is flattened on white, not black", async () => {
    const input = await sharp({ create: { width: 8, height: 8, channels: 4, background: { r: 0, g: 0, b: 0, alpha: 0 } } })
      .png()
      .toBuffer();
    const out = await renderVariant(input, opts({ width: 0, format: "jpeg" }));
    const { data } = await sharp(out).raw().toBuffer({ resolveWithObject: true });
    expect(Math.min(...data)).toBeGreaterThan(245);
  });

  for (const [inFormat, outFormat] of [
    ["gif", "gif"],
    ["webp", "webp"],
    ["gif", "webp"],
  ] as const) {
    test(`animated ${inFormat} → ${outFormat} keeps every frame when resized`, async () => {
      const input = await makeAnimated(inFormat, 64, 48, 3);
      expect((await sharp(input).metadata()).pages).toBe(3);
      const out = await renderVariant(input, opts({ width: 32, format: outFormat }));
      const m = await sharp(out, { animated: true }).metadata();
      expect(m.format).toBe(outFormat);
      expect(m.pages).toBe(3);
      expect(m.width).toBe(32);
      expect(m.pageHeight).toBe(24); // each frame resized, not the stacked strip
    });
  }

  test("animated input to a still format takes the first frame only", async () => {
    const input = await makeAnimated("gif", 64, 48, 3);
    const m = await sharp(await renderVariant(input, opts({ width: 32, format: "png" }))).metadata();
    expect([m.width, m.height, m.pages ?? 1]).toEqual([32, 24, 1]);
  });

  test("a tiny timeout rejects with ProcessingTimeoutError and hands over the running work", async () => {
    const big = await sharp({ create: { width: 4000, height: 4000, channels: 3, background: "#3a6" } })
      .jpeg()
      .toBuffer();
    let held: Promise<void> | undefined;
    const started = Date.now();
    const err = await renderVariant(big, { ...opts({ width: 0, format: "webp" }), webpMethod: 6, timeoutMs: 30, hold: (w) => (held = w) }).catch((e) => e);
    expect(err).toBeInstanceOf(ProcessingTimeoutError);
    expect((err as Error).message).toContain("超时");
    expect(Date.now() - started).toBeLessThan(300);
    expect(held).toBeDefined();
    await held; // settles (never rejects) once libvips is done
  });

  test("an abort signal rejects, before or during processing", async () => {
    const ac = new AbortController();
    ac.abort();
    await expect(renderVariant(await makePng(), { ...opts({ width: 0, format: "webp" }), signal: ac.signal })).rejects.toBeInstanceOf(ProcessingAbortedError);

    const big = await sharp({ create: { width: 3000, height: 3000, channels: 3, background: "#a36" } })
      .jpeg()
      .toBuffer();
    const live = new AbortController();
    let held: Promise<void> | undefined;
    const pending = renderVariant(big, { ...opts({ width: 0, format: "webp" }), webpMethod: 6, signal: live.signal, hold: (w) => (held = w) });
    setTimeout(() => live.abort(), 10);
    await expect(pending).rejects.toBeInstanceOf(ProcessingAbortedError);
    await held;
  });

  test("corrupt input rejects with sharp's error, not a timeout", async () => {
    const err = await renderVariant(Buffer.from("not an image at all"), { ...opts({ width: 0, format: "webp" }), timeoutMs: 5000 }).catch((e) => e);
    expect(err).toBeInstanceOf(Error);
    expect(err).not.toBeInstanceOf(ProcessingTimeoutError);
  });
});
