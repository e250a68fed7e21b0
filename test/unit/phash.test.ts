import { beforeAll, describe, expect, test } from "bun:test";
import sharp from "sharp";
import { hammingDistance, perceptualHash, phashFromHex, phashToHex } from "../../src/images/phash";

const W = 240;
const H = 160;

/** A "photo": diagonal light gradient with a bright disc and a dark bar. */
function scene(): Buffer {
  const px = Buffer.alloc(W * H * 3);
  for (let y = 0; y < H; y++) {
    for (let x = 0; x < W; x++) {
      let v = ((x + y) / (W + H)) * 200;
      if ((x - 170) ** 2 + (y - 55) ** 2 < 35 ** 2) v = 250;
      if (x > 30 && x < 110 && y > 100 && y < 135) v = 15;
      const i = (y * W + x) * 3;
      px[i] = v;
      px[i + 1] = v * 0.8;
      px[i + 2] = 255 - v * 0.5;
    }
  }
  return px;
}

/** A different picture: bright corner wedge, dark disc bottom-left, grey box top-right. */
function otherScene(): Buffer {
  // (Avoid pictures whose brightness varies along one axis only, e.g. plain stripes: most
  // of their DCT coefficients are exactly zero, so the median sits in rounding noise.)
  const px = Buffer.alloc(W * H * 3);
  for (let y = 0; y < H; y++) {
    for (let x = 0; x < W; x++) {
      let v = 40 + (y / H) * 180;
      if (x + 2 * y < 200) v = 230;
      if ((x - 60) ** 2 + (y - 110) ** 2 < 30 ** 2) v = 20;
      if (x > 150 && x < 220 && y > 20 && y < 60) v = 120;
      const i = (y * W + x) * 3;
      px[i] = v * 0.6;
      px[i + 1] = v;
      px[i + 2] = 100;
    }
  }
  return px;
}

const raw = (pixels: Buffer) => sharp(pixels, { raw: { width: W, height: H, channels: 3 } });

let a: bigint;
let b: bigint;
beforeAll(async () => {
  a = await perceptualHash(await raw(scene()).png().toBuffer());
  b = await perceptualHash(await raw(otherScene()).png().toBuffer());
});

describe("perceptualHash", () => {
  test("same picture re-encoded at another quality stays close", async () => {
    const q95 = await perceptualHash(await raw(scene()).jpeg({ quality: 95 }).toBuffer());
    const q30 = await perceptualHash(await raw(scene()).jpeg({ quality: 30 }).toBuffer());
    const webp = await perceptualHash(await raw(scene()).webp({ quality: 50 }).toBuffer());
    expect(hammingDistance(a, q95)).toBeLessThanOrEqual(6);
    expect(hammingDistance(a, q30)).toBeLessThanOrEqual(6);
    expect(hammingDistance(a, webp)).toBeLessThanOrEqual(6);
  });

  test("same picture resized (and slightly squeezed) stays close", async () => {
    const half = await perceptualHash(await raw(scene()).resize(120, 80).jpeg({ quality: 80 }).toBuffer());
    const squeezed = await perceptualHash(await raw(scene()).resize(300, 170, { fit: "fill" }).png().toBuffer());
    expect(hammingDistance(a, half)).toBeLessThanOrEqual(6);
    expect(hammingDistance(a, squeezed)).toBeLessThanOrEqual(6);
  });

  test("different pictures are far apart", async () => {
    expect(hammingDistance(a, b)).toBeGreaterThanOrEqual(20);
  });

  test("bits follow the sign of each coefficient against the median: a negative flips nearly all of them", async () => {
    const negative = await perceptualHash(await raw(scene()).negate().png().toBuffer());
    // Negating the image negates every AC coefficient and the median, so every AC bit
    // except the median's own flips; only rounding noise may save one or two.
    expect(hammingDistance(a, negative)).toBeGreaterThanOrEqual(56);
  });

  test("accepts a file path as well as a buffer", async () => {
    const path = `${process.env.TMPDIR ?? "/tmp"}/kura-phash-${process.pid}-${Date.now()}.png`;
    await raw(scene()).png().toFile(path);
    try {
      expect(await perceptualHash(path)).toBe(a);
    } finally {
      await Bun.file(path).delete();
    }
  });

  test("hashes the picture as displayed: EXIF orientation is applied", async () => {
    // Stored rotated 90° counter-clockwise, tagged "rotate 90° clockwise to display" (6).
    const rotatedStored = await raw(scene()).rotate(270).png().toBuffer();
    const tagged = await sharp(rotatedStored).jpeg({ quality: 90 }).withMetadata({ orientation: 6 }).toBuffer();
    expect((await sharp(tagged).metadata()).orientation).toBe(6);
    expect(hammingDistance(a, await perceptualHash(tagged))).toBeLessThanOrEqual(6);
    // Sanity: the stored pixels alone look like a different picture.
    expect(hammingDistance(a, await perceptualHash(rotatedStored))).toBeGreaterThanOrEqual(20);
  });

  test("animated images are hashed by their first frame", async () => {
    const frames = await Promise.all([scene(), otherScene()].map((p) => raw(p).png().toBuffer()));
    const firstIsScene = await sharp(frames, { join: { animated: true } })
      .gif()
      .toBuffer();
    const firstIsOther = await sharp([...frames].reverse(), { join: { animated: true } })
      .webp({ quality: 90 })
      .toBuffer();
    expect((await sharp(firstIsScene, { animated: true }).metadata()).pages).toBe(2);
    const h1 = await perceptualHash(firstIsScene);
    const h2 = await perceptualHash(firstIsOther);
    expect(hammingDistance(h1, a)).toBeLessThanOrEqual(6);
    expect(hammingDistance(h1, b)).toBeGreaterThanOrEqual(20);
    expect(hammingDistance(h2, b)).toBeLessThanOrEqual(6);
  });
});

describe("hammingDistance", () => {
  test("counts differing bits over all 64", () => {
    expect(hammingDistance(0n, 0n)).toBe(0);
    expect(hammingDistance(0b1011n, 0b0001n)).toBe(2);
    expect(hammingDistance(0n, (1n << 64n) - 1n)).toBe(64);
    expect(hammingDistance(1n << 63n, 1n)).toBe(2);
    expect(hammingDistance(a, a)).toBe(0);
    expect(hammingDistance(a, b)).toBe(hammingDistance(b, a));
  });
});

describe("hex form", () => {
  test("round trips through 16 zero-padded hex digits", () => {
    for (const h of [0n, 1n, 0xabcn, 1n << 63n, (1n << 64n) - 1n, a, b]) {
      const hex = phashToHex(h);
      expect(hex).toMatch(/^[0-9a-f]{16}$/);
      expect(phashFromHex(hex)).toBe(h);
    }
    expect(phashToHex(0xabcn)).toBe("0000000000000abc");
    expect(phashFromHex("FFFFFFFFFFFFFFFF")).toBe((1n << 64n) - 1n);
  });

  test("rejects values that are not 64-bit hashes", () => {
    expect(() => phashToHex(-1n)).toThrow();
    expect(() => phashToHex(1n << 64n)).toThrow();
    for (const bad of ["", "abc", "0000000000000abcd", "000000000000000g", " 000000000000abc", "0x00000000000abc"]) {
      expect(() => phashFromHex(bad)).toThrow();
    }
  });
});
