// Synthetic camera-like JPEGs for upload benchmarks. Each image has its own pixels (so
// neither sha256 dedup nor anything cached short-circuits the work), a smooth pattern
// plus noise so it compresses like a photo rather than like a flat fill, and a small
// EXIF block so `exif_policy=strip` has something to remove.
import sharp from "sharp";
import { runPool } from "./stats";

export interface JpegSpec {
  width: number;
  height: number;
  /** Noise amplitude in grey levels; with quality 80 at 1024x768, 30 gives ~200 KB. */
  noise: number;
  quality: number;
}

export const PHOTO_200KB: JpegSpec = { width: 1024, height: 768, noise: 30, quality: 80 };

/** Raw RGB pixels for one seed: a low-frequency wave pattern plus xorshift noise. */
function pixels(spec: JpegSpec, seed: number): Uint8Array {
  const { width: w, height: h, noise } = spec;
  const fx = 1 + (seed % 7);
  const fy = 1 + ((seed >> 3) % 5);
  const col = Float64Array.from({ length: w }, (_, x) => Math.sin(((x * fx) / w) * 2 * Math.PI + seed));
  const row = Float64Array.from({ length: h }, (_, y) => Math.cos(((y * fy) / h) * 2 * Math.PI));
  const out = new Uint8Array(w * h * 3);
  let s = Math.imul(seed, 2654435761) >>> 0 || 1;
  let i = 0;
  for (let y = 0; y < h; y++) {
    for (let x = 0; x < w; x++) {
      const base = 128 + 60 * col[x]! * row[y]!;
      for (let c = 0; c < 3; c++) {
        s ^= s << 13;
        s ^= s >>> 17;
        s ^= s << 5;
        const v = base + c * 20 + ((((s >>> 0) & 0xff) - 128) * noise) / 128;
        out[i++] = v < 0 ? 0 : Math.min(v, 255);
      }
    }
  }
  return out;
}

export async function makeJpeg(spec: JpegSpec, seed: number): Promise<Uint8Array> {
  const buf = await sharp(pixels(spec, seed), { raw: { width: spec.width, height: spec.height, channels: 3 } })
    .jpeg({ quality: spec.quality })
    .withExif({ IFD0: { Make: "KuraBench", Model: `Synthetic ${seed}`, Software: "bench/lib/jpegs.ts", DateTime: "2024:01:01 12:00:00" } })
    .toBuffer();
  return new Uint8Array(buf.buffer, buf.byteOffset, buf.byteLength);
}

/** `count` distinct JPEGs for seeds firstSeed.. (pixels are built in JS, encoding overlaps). */
export async function makeJpegs(spec: JpegSpec, count: number, firstSeed = 1): Promise<Uint8Array[]> {
  const out: Uint8Array[] = new Array(count);
  const seeds = Array.from({ length: count }, (_, i) => firstSeed + i);
  await runPool(seeds, 4, async (seed, i) => {
    out[i] = await makeJpeg(spec, seed);
  });
  return out;
}
