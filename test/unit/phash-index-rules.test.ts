// The near-duplicate index's rules, each judged exactly: the 7 chunks of the multi-index cover
// every bit once (so any two hashes within distance 6 share one); the index answers exactly what
// a brute-force comparison answers, at distances 6 and 7, for hashes with the top bit set (stored
// as negative SQLite integers), all-zero and all-one hashes; the perceptual hash equals a slow
// reference DCT. The scan rounds and merges that use it: dedup-round-rules.test.ts.
import { Database } from "bun:sqlite";
import { afterAll, beforeEach, describe, expect, test } from "bun:test";
import { crc32, deflateSync } from "node:zlib";
import fc from "fast-check";
import sharp from "sharp";
import { migrate } from "../../src/db/open";
import { hammingDistance, perceptualHash, phashFromHex, phashToHex } from "../../src/images/phash";
import { CHUNK_BITS, hamming, MIH_MAX_DISTANCE, PhashIndex, phashChunks, phashToInt } from "../../src/images/phash-index";
import { flip, hex64, outcome, rng, textDistance, U64 } from "../helpers/phashes";

/** Where bit `p` must land: chunk 0 holds bits 0–9, chunk k ≥ 1 holds bits 10 + 9(k − 1) … 18 + 9(k − 1). */
const chunkOf = (p: number) => (p < 10 ? 0 : 1 + Math.floor((p - 10) / 9));
const offsetOf = (chunk: number) => (chunk === 0 ? 0 : 10 + 9 * (chunk - 1));
/** Differing bits counted on the hex text, independent of the BigInt code under test. */

describe("chunks", () => {
  test("the layout: 7 chunks of 10 + 6×9 bits, so the index answers up to distance 6", () => {
    expect([...CHUNK_BITS]).toEqual([10, 9, 9, 9, 9, 9, 9]);
    expect(MIH_MAX_DISTANCE).toBe(6);
  });

  test("every bit position of the 64-bit hash lands in exactly one chunk, at its own place", () => {
    for (let p = 0; p < 64; p++) {
      const expected = [0, 0, 0, 0, 0, 0, 0];
      expected[chunkOf(p)] = 2 ** (p - offsetOf(chunkOf(p)));
      expect({ bit: p, chunks: phashChunks(1n << BigInt(p)) }).toEqual({ bit: p, chunks: expected });
      // The signed form SQLite stores (bit 63 makes it negative) cuts the same.
      expect(phashChunks(BigInt.asIntN(64, 1n << BigInt(p)))).toEqual(expected);
    }
  });

  const rows: { rule: string; hex: string; int: bigint; chunks: number[] }[] = [
    { rule: "all zero", hex: "0000000000000000", int: 0n, chunks: [0, 0, 0, 0, 0, 0, 0] },
    { rule: "all one (stored as -1)", hex: "ffffffffffffffff", int: -1n, chunks: [1023, 511, 511, 511, 511, 511, 511] },
    { rule: "the top bit alone (the most negative integer)", hex: "8000000000000000", int: -(1n << 63n), chunks: [0, 0, 0, 0, 0, 0, 256] },
    { rule: "every bit but the top (the largest positive)", hex: "7fffffffffffffff", int: (1n << 63n) - 1n, chunks: [1023, 511, 511, 511, 511, 511, 255] },
    { rule: "bits 9 and 10: the first chunk boundary", hex: "0000000000000600", int: 0x600n, chunks: [512, 1, 0, 0, 0, 0, 0] },
    { rule: "bits 54 and 55: the last chunk boundary", hex: "00c0000000000000", int: 0xc0000000000000n, chunks: [0, 0, 0, 0, 0, 256, 1] },
    { rule: "upper-case hex, negative", hex: "FFFFFFFFFFFFFFFE", int: -2n, chunks: [1022, 511, 511, 511, 511, 511, 511] },
    { rule: "the lowest bit", hex: "0000000000000001", int: 1n, chunks: [1, 0, 0, 0, 0, 0, 0] },
  ];
  for (const row of rows)
    test(`phashToInt and phashChunks: ${row.rule}`, () => {
      expect(phashToInt(row.hex)).toBe(row.int);
      expect(phashChunks(row.int)).toEqual(row.chunks);
      expect(phashChunks(BigInt.asUintN(64, row.int))).toEqual(row.chunks);
    });

  test("the chunks put back together are the hash, each within its width", () => {
    fc.assert(
      fc.property(fc.bigInt({ min: -(1n << 63n), max: (1n << 63n) - 1n }), (h) => {
        const chunks = phashChunks(h);
        expect(chunks).toHaveLength(7);
        chunks.forEach((c, i) => {
          expect(c).toBeGreaterThanOrEqual(0);
          expect(c).toBeLessThan(2 ** CHUNK_BITS[i]!);
        });
        expect(chunks.reduce((acc, c, i) => acc | (BigInt(c) << BigInt(offsetOf(i))), 0n)).toBe(BigInt.asUintN(64, h));
      }),
      { seed: 20261129, numRuns: 200 },
    );
  });
});

describe("hamming distances", () => {
  const rows: { rule: string; a: bigint; b: bigint; d: number }[] = [
    { rule: "identical", a: 0x1234n, b: 0x1234n, d: 0 },
    { rule: "all zero against all one: 64", a: 0n, b: -1n, d: 64 },
    { rule: "the signed and unsigned forms of one hash are the same hash", a: -1n, b: U64, d: 0 },
    { rule: "the top bit alone, stored negative", a: -(1n << 63n), b: 0n, d: 1 },
    { rule: "the low 32 bits", a: 0xffffffffn, b: 0n, d: 32 },
    { rule: "the high 32 bits", a: 0xffffffff00000000n, b: 0n, d: 32 },
    { rule: "bits 31 and 32, across the halves", a: 1n << 31n, b: 1n << 32n, d: 2 },
    { rule: "alternating bits", a: 0x5555555555555555n, b: 0n, d: 32 },
    { rule: "nibble pattern", a: 0x0f0f0f0f0f0f0f0fn, b: -1n, d: 32 },
  ];
  for (const row of rows)
    test(row.rule, () => {
      expect(hamming(row.a, row.b)).toBe(row.d);
      expect(hamming(row.b, row.a)).toBe(row.d);
      expect(hammingDistance(BigInt.asUintN(64, row.a), BigInt.asUintN(64, row.b))).toBe(row.d);
    });

  test("hammingDistance reads its arguments as 64 bits: negatives wrap, bits above 64 are ignored", () => {
    expect(hammingDistance(-1n, 0n)).toBe(64);
    expect(hammingDistance(-1n, U64)).toBe(0);
    expect(hammingDistance(1n << 64n, 0n)).toBe(0);
    expect(hammingDistance((1n << 64n) | 1n, 0n)).toBe(1);
  });

  test("both counts agree with counting differing hex digits, for any two hashes", () => {
    fc.assert(
      fc.property(fc.bigInt({ min: 0n, max: U64 }), fc.bigInt({ min: 0n, max: U64 }), (a, b) => {
        const d = textDistance(hex64(a), hex64(b));
        expect(hamming(BigInt.asIntN(64, a), BigInt.asIntN(64, b))).toBe(d);
        expect(hamming(a, b)).toBe(d);
        expect(hammingDistance(a, b)).toBe(d);
      }),
      { seed: 20261129, numRuns: 200 },
    );
  });
});

describe("hex form", () => {
  const rows: { rule: string; run: () => unknown; answer: string }[] = [
    { rule: "zero is 16 zeros", run: () => phashToHex(0n), answer: "0000000000000000" },
    { rule: "the largest 64-bit value is accepted", run: () => phashToHex(U64), answer: "ffffffffffffffff" },
    { rule: "one past 64 bits is refused", run: () => phashToHex(U64 + 1n), answer: "RangeError: 感知哈希超出 64 位范围：18446744073709551616" },
    { rule: "a negative is refused", run: () => phashToHex(-1n), answer: "RangeError: 感知哈希超出 64 位范围：-1" },
    { rule: "17 digits are refused", run: () => phashFromHex("00000000000000001"), answer: 'RangeError: 无效的感知哈希："00000000000000001"' },
    { rule: "15 digits are refused", run: () => phashFromHex("000000000000001"), answer: 'RangeError: 无效的感知哈希："000000000000001"' },
    { rule: "a trailing newline is refused", run: () => phashFromHex("0000000000000001\n"), answer: 'RangeError: 无效的感知哈希："0000000000000001\\n"' },
    { rule: "upper-case digits are read", run: () => phashFromHex("ABCDEF0123456789").toString(16), answer: "abcdef0123456789" },
  ];
  for (const row of rows)
    test(row.rule, () => {
      expect(outcome(row.run)).toBe(row.answer);
    });
});
/** A bare migrated database with the index: blobs inserted by hash, each one indexed. */
function indexDb() {
  const db = new Database(":memory:", { strict: true });
  migrate(db);
  const insert = db.query(
    `INSERT INTO blobs (sha256, phash, storage_key, mime, size, width, height, ref_count, pending_delete, created_at)
     VALUES (?, ?, 'k', 'image/jpeg', 1, 1, 1, 1, ?, '2026-01-01 00:00:00')`,
  );
  const index = new PhashIndex(db);
  let n = 0;
  const add = (hex: string, pendingDelete = 0) => {
    const id = Number(insert.run(`sha-${n++}`, hex, pendingDelete).lastInsertRowid);
    index.add(id, phashToInt(hex));
    return id;
  };
  return { db, index, add, reset: () => db.exec("DELETE FROM phash_index; DELETE FROM blobs") };
}

describe("the index", () => {
  const { db, index, add, reset } = indexDb();
  beforeEach(reset);
  afterAll(() => db.close());
  const near = (hex: string, d: number, self = -1, limit?: number) => index.near(phashToInt(hex), d, self, limit);
  const BASE = "9e3779b97f4a7c15";

  test("a pair at distance 6 that agrees on one chunk only is found, whichever chunk that is", () => {
    for (let keep = 0; keep < 7; keep++) {
      reset();
      const bits = [0, 1, 2, 3, 4, 5, 6].filter((c) => c !== keep).map((c) => offsetOf(c));
      const other = flip(BASE, ...bits);
      const agreeing = phashChunks(phashToInt(BASE)).filter((v, i) => v === phashChunks(phashToInt(other))[i]);
      expect({ keep, agreeing: agreeing.length }).toEqual({ keep, agreeing: 1 });
      const a = add(BASE);
      const b = add(other);
      expect({ keep, found: near(BASE, 6, a) }).toEqual({ keep, found: [{ blobId: b, distance: 6 }] });
      expect({ keep, found: near(other, 6, b) }).toEqual({ keep, found: [{ blobId: a, distance: 6 }] });
    }
  });

  test("distance 7 is out: beyond the setting when it shares chunks, and beyond what the index answers", () => {
    const a = add(BASE);
    const sevenHex = flip(BASE, 0, 1, 2, 3, 4, 5, 6); // all in chunk 0: the other six agree, so every probe but one reads it
    const seven = add(sevenHex);
    const six = add(flip(BASE, 0, 1, 2, 3, 4, 5));
    expect(phashChunks(phashToInt(sevenHex)).filter((v, i) => v === phashChunks(phashToInt(BASE))[i])).toHaveLength(6);
    expect(hamming(phashToInt(BASE), phashToInt(sevenHex))).toBe(7);
    expect(near(BASE, 6, a)).toEqual([{ blobId: six, distance: 6 }]);
    expect(near(BASE, 5, a)).toEqual([]);
    expect(outcome(() => near(BASE, 7, a))).toBe("RangeError: PhashIndex.near answers distances up to 6, not 7");
    // From the other side: the blob 7 away sees the one 1 away and, itself excluded, nothing else.
    expect(near(sevenHex, 6, seven)).toEqual([{ blobId: six, distance: 1 }]);
  });

  test("the distance is a bound on both sides: a blob at distance d is found exactly when d ≤ maxDistance", () => {
    const self = add(BASE);
    const at = Array.from({ length: 8 }, (_, d) => add(flip(BASE, ...Array.from({ length: d }, (_, i) => 20 + i))));
    for (let max = 0; max <= 6; max++) {
      const expected = at.slice(0, max + 1).map((blobId, d) => ({ blobId, distance: d }));
      expect({ max, found: near(BASE, max, self) }).toEqual({ max, found: expected });
    }
  });

  test("never itself, each neighbour once though it agrees on all 7 chunks, nearest first and then the lower id", () => {
    const a = add(BASE);
    const twin = add(BASE);
    const far = add(flip(BASE, 63, 62));
    const near1 = add(flip(BASE, 40));
    const tie = add(flip(BASE, 11));
    expect(near(BASE, 6, a)).toEqual([
      { blobId: twin, distance: 0 },
      { blobId: near1, distance: 1 },
      { blobId: tie, distance: 1 },
      { blobId: far, distance: 2 },
    ]);
    // `self` is only the blob asking: the same hash under another id is still found.
    expect(near(BASE, 6, twin).map((n) => n.blobId)).toEqual([a, near1, tie, far]);
    expect(near(BASE, 6).map((n) => n.blobId)).toEqual([a, twin, near1, tie, far]);
  });

  test("the limit counts live neighbours: a pending delete is skipped and the next one takes its place", () => {
    const a = add(BASE);
    const gone = add(flip(BASE, 1), 1);
    const n2 = add(flip(BASE, 2, 3));
    const n3 = add(flip(BASE, 4, 5, 6));
    const n4 = add(flip(BASE, 7, 8, 9, 10));
    expect(near(BASE, 6, a, 0)).toEqual([]);
    expect(near(BASE, 6, a, 1)).toEqual([{ blobId: n2, distance: 2 }]);
    expect(near(BASE, 6, a, 2)).toEqual([
      { blobId: n2, distance: 2 },
      { blobId: n3, distance: 3 },
    ]);
    expect(near(BASE, 6, a).map((n) => n.blobId)).toEqual([n2, n3, n4]);
    expect(gone).toBeLessThan(n2);
  });

  test("hashes with the top bit set, all-zero and all-one hashes: stored signed, found at their true distance", () => {
    const ones = add("ffffffffffffffff");
    const topOnly = add("8000000000000000");
    const zero = add("0000000000000000");
    const allButTop = add("7fffffffffffffff");
    const nearOnes = add(flip("ffffffffffffffff", 0, 63, 30));
    const stored = db.query<{ hash: bigint }, [number]>("SELECT hash FROM phash_index WHERE blob_id = ? AND chunk = 6").safeIntegers(true);
    expect(stored.get(ones)!.hash).toBe(-1n);
    expect(stored.get(topOnly)!.hash).toBe(-(1n << 63n));
    expect(near("ffffffffffffffff", 6, ones)).toEqual([
      { blobId: allButTop, distance: 1 },
      { blobId: nearOnes, distance: 3 },
    ]);
    expect(near("0000000000000000", 6, zero)).toEqual([{ blobId: topOnly, distance: 1 }]);
    expect(near("8000000000000000", 6, topOnly)).toEqual([{ blobId: zero, distance: 1 }]);
    expect(near("fffffffffffffffe", 0)).toEqual([]);
    expect(near("fffffffffffffffe", 1)).toEqual([{ blobId: ones, distance: 1 }]);
  });
});

describe("perceptual hash", () => {
  const N = 32;
  /** A 32×32 grey PNG: the hash's own reduction leaves it exactly as it is. */
  const greyPng = (px: Uint8Array) =>
    sharp(Buffer.from(px), { raw: { width: N, height: N, channels: 1 } })
      .png()
      .toBuffer();
  /** The orthonormal DCT-II's scale: the first basis vector's is 1/√2 of the others'. */
  const orthonormal = (k: number) => (k === 0 ? Math.sqrt(1 / N) : Math.sqrt(2 / N));
  /** The hash the slow way: the 2-D DCT-II as one double sum per coefficient, the median of the 63 AC terms. */
  function referenceHash(px: Uint8Array, c = orthonormal): bigint {
    const coeffs: number[] = [];
    for (let u = 0; u < 8; u++)
      for (let v = 0; v < 8; v++) {
        let sum = 0;
        for (let y = 0; y < N; y++)
          for (let x = 0; x < N; x++) sum += px[y * N + x]! * Math.cos(((2 * y + 1) * u * Math.PI) / (2 * N)) * Math.cos(((2 * x + 1) * v * Math.PI) / (2 * N));
        coeffs.push(c(u) * c(v) * sum);
      }
    const median = coeffs.slice(1).sort((a, b) => a - b)[31]!;
    let bits = "";
    for (const k of coeffs) bits += k > median ? "1" : "0";
    return BigInt(`0b${bits}`);
  }
  const noise = (_x: number, _y: number, r: () => number) => Math.floor(r() * 256);
  /** `sameScale`: how many bits one scale for every frequency (no 1/√2 on the first row and column) would change. */
  const pictures: { rule: string; seed: number; sameScale: number; px: (x: number, y: number, r: () => number) => number }[] = [
    { rule: "seeded noise", seed: 12, sameScale: 0, px: noise },
    { rule: "seeded noise whose first row and column decide bits by their own scale", seed: 21, sameScale: 4, px: noise },
    { rule: "a bright disc off centre on a gradient", seed: 0, sameScale: 0, px: (x, y) => ((x - 20) ** 2 + (y - 11) ** 2 < 49 ? 250 : 4 * x + 2 * y) },
    {
      rule: "tall rectangle and diagonal wedge",
      seed: 0,
      sameScale: 0,
      px: (x, y) => (x > 5 && x < 12 && y > 3 && y < 28 ? 20 : x + y < 20 ? 230 : 90 + y),
    },
    { rule: "smooth waves", seed: 0, sameScale: 0, px: (x, y) => Math.round(127 + 120 * Math.sin(x / 3.1) * Math.cos(y / 4.7)) },
  ];
  for (const p of pictures)
    test(`equals the reference DCT hash, DC bit first, 31 of the 63 AC bits above their median: ${p.rule}`, async () => {
      const r = rng(p.seed);
      const px = Uint8Array.from({ length: N * N }, (_, i) => p.px(i % N, Math.floor(i / N), r));
      const h = await perceptualHash(await greyPng(px));
      expect(hex64(h)).toBe(hex64(referenceHash(px)));
      expect(
        hammingDistance(
          h,
          referenceHash(px, () => Math.sqrt(2 / N)),
        ),
      ).toBe(p.sameScale);
      expect(h >> 63n).toBe(1n);
      expect(textDistance(hex64(h & ((1n << 63n) - 1n)), "0000000000000000")).toBe(31);
    });

  test("a black picture: no coefficient is above the median, so no bit is set", async () => {
    expect(await perceptualHash(await greyPng(new Uint8Array(N * N)))).toBe(0n);
  });

  /** 64×48 RGBA: a dark bar and disc, the rest fully transparent (black underneath). */
  function cutout(): Buffer {
    const px = Buffer.alloc(64 * 48 * 4);
    for (let y = 0; y < 48; y++)
      for (let x = 0; x < 64; x++) {
        const shape = (x > 8 && x < 30 && y > 10 && y < 40) || (x - 45) ** 2 + (y - 20) ** 2 < 100;
        if (shape) px.set([30, 30, 30, 255], (y * 64 + x) * 4);
      }
    return px;
  }

  test("transparency is seen over white", async () => {
    const transparent = await sharp(cutout(), { raw: { width: 64, height: 48, channels: 4 } })
      .png()
      .toBuffer();
    const onWhite = await sharp(cutout(), { raw: { width: 64, height: 48, channels: 4 } })
      .flatten({ background: "#ffffff" })
      .png()
      .toBuffer();
    const onBlack = await sharp(cutout(), { raw: { width: 64, height: 48, channels: 4 } })
      .flatten({ background: "#000000" })
      .png()
      .toBuffer();
    const h = await perceptualHash(transparent);
    expect(hex64(h)).toBe(hex64(await perceptualHash(onWhite)));
    expect(hammingDistance(h, await perceptualHash(onBlack))).toBeGreaterThanOrEqual(20);
  });

  test("colour counts as its grey level, not one channel", async () => {
    const px = Buffer.alloc(N * N * 3);
    for (let y = 0; y < N; y++) for (let x = 0; x < N; x++) px.set([x < 16 ? 240 : 10, y < 16 ? 240 : 10, (x * y) % 200], (y * N + x) * 3);
    const colour = sharp(px, { raw: { width: N, height: N, channels: 3 } });
    const h = await perceptualHash(await colour.clone().png().toBuffer());
    expect(hex64(h)).toBe(hex64(await perceptualHash(await colour.clone().grayscale().png().toBuffer())));
    const red = await colour.clone().extractChannel(0).png().toBuffer();
    expect(hammingDistance(h, await perceptualHash(red))).toBeGreaterThanOrEqual(10);
  });

  test("a picture of another shape is squeezed to 32×32 whole, not cropped", async () => {
    const px = Buffer.alloc(96 * 32);
    for (let y = 0; y < 32; y++) for (let x = 0; x < 96; x++) px[y * 96 + x] = x < 32 ? 200 - 5 * y : x < 64 ? 40 + ((x * y) % 90) : (x - y) * 3;
    const wide = sharp(px, { raw: { width: 96, height: 32, channels: 1 } });
    const h = await perceptualHash(await wide.clone().png().toBuffer());
    expect(hex64(h)).toBe(hex64(await perceptualHash(await wide.clone().resize(N, N, { fit: "fill" }).png().toBuffer())));
    expect(hammingDistance(h, await perceptualHash(await wide.clone().resize(N, N, { fit: "cover" }).png().toBuffer()))).toBeGreaterThanOrEqual(10);
  });

  test("real copies are within the threshold and the index finds them; a different picture is not", async () => {
    const W = 240;
    const H = 160;
    const scene = Buffer.alloc(W * H * 3);
    const other = Buffer.alloc(W * H * 3);
    for (let y = 0; y < H; y++)
      for (let x = 0; x < W; x++) {
        let v = ((x + y) / (W + H)) * 200;
        if ((x - 170) ** 2 + (y - 55) ** 2 < 35 ** 2) v = 250;
        if (x > 30 && x < 110 && y > 100 && y < 135) v = 15;
        scene.set([v, v * 0.8, 255 - v * 0.5], (y * W + x) * 3);
        let w = 40 + (y / H) * 180;
        if (x + 2 * y < 200) w = 230;
        if ((x - 60) ** 2 + (y - 110) ** 2 < 30 ** 2) w = 20;
        other.set([w * 0.6, w, 100], (y * W + x) * 3);
      }
    const raw = (px: Buffer) => sharp(px, { raw: { width: W, height: H, channels: 3 } });
    const hashes = {
      original: await perceptualHash(await raw(scene).png().toBuffer()),
      halfSizeJpeg: await perceptualHash(await raw(scene).resize(120, 80).jpeg({ quality: 70 }).toBuffer()),
      webp: await perceptualHash(await raw(scene).webp({ quality: 40 }).toBuffer()),
      different: await perceptualHash(await raw(other).png().toBuffer()),
    };
    expect(hammingDistance(hashes.original, hashes.halfSizeJpeg)).toBeLessThanOrEqual(6);
    expect(hammingDistance(hashes.original, hashes.webp)).toBeLessThanOrEqual(6);
    expect(hammingDistance(hashes.original, hashes.different)).toBeGreaterThanOrEqual(20);
    const { db, add } = indexDb();
    try {
      const ids = Object.fromEntries(Object.entries(hashes).map(([name, h]) => [name, add(phashToHex(h))]));
      const found = new PhashIndex(db).near(phashToInt(phashToHex(hashes.original)), 6, ids.original!);
      expect(found.map((n) => n.blobId).sort()).toEqual([ids.halfSizeJpeg!, ids.webp!].sort());
    } finally {
      db.close();
    }
  });
});

// Last but one: the slowest checks, reached only by what the exact tables above let through.
describe("the index against brute force", () => {
  const { db, index, add, reset } = indexDb();
  afterAll(() => db.close());
  const near = (hex: string, d: number, self: number, limit?: number) => index.near(phashToInt(hex), d, self, limit);

  test("property: near() answers exactly what brute force answers over small sets with planted near pairs", () => {
    const cluster = fc.record({
      base: fc.bigInt({ min: 0n, max: U64 }),
      variants: fc.array(fc.record({ bits: fc.uniqueArray(fc.integer({ min: 0, max: 63 }), { maxLength: 8 }), pending: fc.boolean() }), {
        minLength: 1,
        maxLength: 6,
      }),
    });
    fc.assert(
      fc.property(fc.array(cluster, { minLength: 1, maxLength: 4 }), fc.integer({ min: 0, max: 6 }), fc.integer({ min: 1, max: 8 }), (clusters, max, limit) => {
        reset();
        const blobs: { id: number; phash: string; pending: boolean }[] = [];
        for (const c of clusters)
          for (const v of c.variants) {
            const phash = flip(hex64(c.base), ...v.bits);
            blobs.push({ id: add(phash, v.pending ? 1 : 0), phash, pending: v.pending });
          }
        const live = blobs.filter((b) => !b.pending);
        for (const q of blobs) {
          const expected = live
            .filter((b) => b.id !== q.id)
            .map((b) => ({ blobId: b.id, distance: textDistance(q.phash, b.phash) }))
            .filter((n) => n.distance <= max)
            .sort((x, y) => x.distance - y.distance || x.blobId - y.blobId);
          expect(near(q.phash, max, q.id)).toEqual(expected);
          expect(near(q.phash, max, q.id, limit)).toEqual(expected.slice(0, limit));
        }
      }),
      { seed: 20261129, numRuns: 200 },
    );
  });
});

test("a picture past sharp's default input limit (268 megapixels) is hashed too", async () => {
  // A 16400×16400 black 1-bit PNG: 269 megapixels in 33 KB.
  const [w, h] = [16_400, 16_400];
  const chunk = (type: string, data: Buffer) => {
    const body = Buffer.concat([Buffer.from(type, "latin1"), data]);
    const out = Buffer.alloc(body.length + 8);
    out.writeUInt32BE(data.length, 0);
    body.copy(out, 4);
    out.writeUInt32BE(crc32(body) >>> 0, body.length + 4);
    return out;
  };
  const header = Buffer.alloc(13);
  header.writeUInt32BE(w, 0);
  header.writeUInt32BE(h, 4);
  header[8] = 1; // bit depth 1, colour type 0 (grey)
  const rows = Buffer.alloc((1 + Math.ceil(w / 8)) * h);
  const png = Buffer.concat([
    Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
    chunk("IHDR", header),
    chunk("IDAT", deflateSync(rows)),
    chunk("IEND", Buffer.alloc(0)),
  ]);
  expect(png.length).toBeLessThan(100_000);
  expect(await perceptualHash(png)).toBe(0n);
}, 20_000);
