// 64-bit perceptual hash (DCT pHash) used to find near-duplicate uploads: pictures that
// differ only by re-encoding, quality or size end up a few bits apart, unrelated pictures
// about 32 bits apart. Exact duplicates are found by sha256; this is only for candidates.
import sharp from "sharp";

const SIZE = 32; // the picture is reduced to SIZE x SIZE grey levels
const KEEP = 8; // the lowest KEEP x KEEP frequencies make the 64 bits

// Orthonormal DCT-II basis: COS[k][n] = c(k) * cos((2n+1) k pi / 2N). The scale factors
// matter: without them the first row/column would be weighted differently from the rest
// when compared against the shared median.
const COS: Float64Array[] = Array.from({ length: KEEP }, (_, k) => {
  const scale = k === 0 ? Math.sqrt(1 / SIZE) : Math.sqrt(2 / SIZE);
  return Float64Array.from({ length: SIZE }, (_, n) => scale * Math.cos(((2 * n + 1) * k * Math.PI) / (2 * SIZE)));
});

/**
 * Hash of the first frame as displayed (EXIF orientation applied, transparency over white),
 * in grey, squeezed to 32x32 ignoring the aspect ratio. Bit order: coefficient (u, v) with
 * u = vertical and v = horizontal frequency sits at bit 63 - (u*8 + v), so the DC term is
 * the most significant bit. The DC term is left out of the median because it only measures
 * average brightness and would skew the threshold.
 */
export async function perceptualHash(input: string | Buffer): Promise<bigint> {
  const { data, info } = await sharp(input, { pages: 1, limitInputPixels: false })
    .rotate()
    .flatten({ background: "#ffffff" })
    .grayscale()
    .resize(SIZE, SIZE, { fit: "fill" })
    .raw()
    .toBuffer({ resolveWithObject: true });
  const channels = info.channels;
  const pixels = new Float64Array(SIZE * SIZE);
  for (let i = 0; i < pixels.length; i++) pixels[i] = data[i * channels];
  return hashFromCoefficients(lowFrequencies(pixels));
}

/** The top-left KEEP x KEEP block of the 2-D DCT-II of a SIZE x SIZE image (row-major). */
function lowFrequencies(pixels: Float64Array): Float64Array {
  // Separable transform: rows first (keeping only KEEP horizontal frequencies), then columns.
  const rows = new Float64Array(SIZE * KEEP);
  for (let y = 0; y < SIZE; y++) {
    for (let v = 0; v < KEEP; v++) {
      let sum = 0;
      for (let x = 0; x < SIZE; x++) sum += pixels[y * SIZE + x] * COS[v][x];
      rows[y * KEEP + v] = sum;
    }
  }
  const out = new Float64Array(KEEP * KEEP);
  for (let u = 0; u < KEEP; u++) {
    for (let v = 0; v < KEEP; v++) {
      let sum = 0;
      for (let y = 0; y < SIZE; y++) sum += rows[y * KEEP + v] * COS[u][y];
      out[u * KEEP + v] = sum;
    }
  }
  return out;
}

function hashFromCoefficients(coeffs: Float64Array): bigint {
  const median = medianOf(coeffs.subarray(1)); // without DC
  let hash = 0n;
  for (let i = 0; i < coeffs.length; i++) hash = (hash << 1n) | (coeffs[i] > median ? 1n : 0n);
  return hash;
}

function medianOf(values: Float64Array): number {
  const sorted = Float64Array.from(values).sort();
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
}

const MASK_64 = (1n << 64n) - 1n;

export function hammingDistance(a: bigint, b: bigint): number {
  let x = (a ^ b) & MASK_64;
  let count = 0;
  while (x) {
    x &= x - 1n; // clears the lowest set bit
    count++;
  }
  return count;
}

/** 16 lowercase hex digits; this is how hashes are stored (SQLite integers are signed). */
export function phashToHex(h: bigint): string {
  if (h < 0n || h > MASK_64) throw new RangeError(`感知哈希超出 64 位范围：${h}`);
  return h.toString(16).padStart(16, "0");
}

export function phashFromHex(hex: string): bigint {
  if (!/^[0-9a-fA-F]{16}$/.test(hex)) throw new RangeError(`无效的感知哈希：${JSON.stringify(hex)}`);
  return BigInt(`0x${hex}`);
}
