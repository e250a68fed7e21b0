// Near-duplicate detection's rules, each judged exactly: the 7 chunks of the multi-index cover
// every bit once (so any two hashes within distance 6 share one); the index answers exactly what
// a brute-force comparison answers, at distances 6 and 7, for hashes with the top bit set (stored
// as negative SQLite integers), all-zero and all-one hashes; the perceptual hash equals a slow
// reference DCT; a scan round stores each pair once (blob_a < blob_b), never a blob with itself,
// honours the threshold setting on both sides, and reads a damaged watermark as a fresh start;
// a merge refuses what it must and refills the kept blob's pairs.
import { Database } from "bun:sqlite";
import { afterAll, beforeAll, beforeEach, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { crc32, deflateSync } from "node:zlib";
import fc from "fast-check";
import sharp from "sharp";
import { deleteMeta, readMeta, writeMeta } from "../../src/db/meta";
import { createAppContext } from "../../src/app-context";
import { openDataDir } from "../../src/boot";
import { readBootstrap } from "../../src/config/bootstrap";
import { migrate } from "../../src/db/open";
import { dismiss, merge, scanRound, stopRescans } from "../../src/images/dedup";
import { hammingDistance, perceptualHash, phashFromHex, phashToHex } from "../../src/images/phash";
import { CHUNK_BITS, hamming, MIH_MAX_DISTANCE, PhashIndex, phashChunks, phashToInt } from "../../src/images/phash-index";
import { insertCandidate } from "../../src/images/repos/dedup";
import { SYSTEM_ACTOR } from "../../src/ops/audit";
import type { CapturedLog } from "../helpers/context";
import { bruteForce, cappedPairs, hex64, liveById, popcount32, population, rng, storedPairs } from "../helpers/phashes";

const U64 = (1n << 64n) - 1n;
/** `hex` with the given bits (0 = least significant) flipped. */
const flip = (hex: string, ...bits: number[]) => hex64(bits.reduce((h, b) => h ^ (1n << BigInt(b)), BigInt(`0x${hex}`)));
/** Where bit `p` must land: chunk 0 holds bits 0–9, chunk k ≥ 1 holds bits 10 + 9(k − 1) … 18 + 9(k − 1). */
const chunkOf = (p: number) => (p < 10 ? 0 : 1 + Math.floor((p - 10) / 9));
const offsetOf = (chunk: number) => (chunk === 0 ? 0 : 10 + 9 * (chunk - 1));
/** Differing bits counted on the hex text, independent of the BigInt code under test. */
const textDistance = (a: string, b: string) => [...a].reduce((n, c, i) => n + popcount32(Number.parseInt(c, 16) ^ Number.parseInt(b[i]!, 16)), 0);
/** What `run` answers: its value as text, or the error's class and message. */
const outcome = (run: () => unknown) => {
  try {
    return String(run());
  } catch (err) {
    return `${(err as Error).constructor.name}: ${(err as Error).message}`;
  }
};

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

/**
 * The real application context over `dataDir`, as test/helpers/context.ts opens it but without the
 * built-in admin, whose password hash costs a quarter of a second (paid again by every mutant); a
 * plain user owns the images instead.
 */
async function openContext(dataDir: string) {
  const logs: CapturedLog[] = [];
  const capture =
    (level: string) =>
    (msg: string, fields: Record<string, unknown> = {}) =>
      void logs.push({ level, msg, fields });
  const log = { info: capture("INFO"), warn: capture("WARN"), error: capture("ERROR") };
  const boot = readBootstrap({ KURA_DATA_DIR: dataDir, KURA_LISTEN: "127.0.0.1:0" });
  const { db, key } = openDataDir(boot, log);
  db.query("INSERT OR IGNORE INTO users (id, name, role, password_hash, created_at) VALUES ('u1', 'u1', 'user', '!', '2026-01-01 00:00:00')").run();
  const app = await createAppContext(boot, db, key, log, () => {});
  return {
    app,
    logs,
    close: () => {
      app.dbLock.dispose();
      db.close();
    },
  };
}

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

describe("scan rounds and merges", () => {
  let dir: string;
  let ctx: Awaited<ReturnType<typeof openContext>>;
  const KEY = "dedup_scan_watermark";
  let n = 0;
  const add = (phash: string, pendingDelete = 0) =>
    Number(
      ctx.app.db
        .query(
          `INSERT INTO blobs (sha256, phash, storage_key, mime, size, width, height, ref_count, pending_delete, created_at)
           VALUES (?, ?, 'k', 'image/jpeg', 1, 1, 1, 1, ?, '2026-01-01 00:00:00')`,
        )
        .run(`sha-${n++}`, phash, pendingDelete).lastInsertRowid,
    );
  const mark = () => JSON.parse(readMeta(ctx.app.db, KEY) ?? "null");
  const setDistance = (d: number) => ctx.app.settings.update({ dedup_phash_max_distance: d });
  const logged = (msg: string): CapturedLog[] => ctx.logs.filter((l) => l.msg === msg);
  const BASE = "5bd1e9955bd1e995";
  /** Blobs at exact distances 0–8 from BASE (bits spread over every chunk), an unrelated one, and BASE itself. */
  const planted = () => [
    BASE,
    ...Array.from({ length: 9 }, (_, d) => flip(BASE, ...Array.from({ length: d }, (_, i) => (i * 9 + 5) % 64))),
    "a1b2c3d4e5f60718",
  ];

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), "kura-dedup-rules-"));
    ctx = await openContext(dir);
  });
  afterAll(() => {
    ctx.close();
    rmSync(dir, { recursive: true, force: true });
  });
  beforeEach(() => {
    setDistance(6);
    ctx.app.db.exec("DELETE FROM dedup_candidates; DELETE FROM phash_index; DELETE FROM jobs; DELETE FROM images; DELETE FROM blobs; DELETE FROM audit");
    deleteMeta(ctx.app.db, KEY);
    ctx.logs.length = 0;
  });

  for (const d of [0, 1, 5, 6, 7])
    test(`the threshold setting at ${d}: exactly the pairs within ${d}, each once, blob_a < blob_b, never a blob with itself`, async () => {
      setDistance(d);
      const blobs = planted().map((phash) => ({ id: add(phash), phash }));
      const expected = bruteForce(blobs, d);
      expect(expected.length).toBeGreaterThan(0);
      expect(await scanRound(ctx.app)).toEqual({ compared: blobs.length, found: expected.length });
      expect(storedPairs(ctx.app.db)).toEqual(expected);
      expect(ctx.app.db.query("SELECT count(*) AS n FROM dedup_candidates WHERE blob_a >= blob_b OR state != 'pending'").get()).toEqual({ n: 0 });
      expect(mark()).toEqual({ after: blobs.at(-1)!.id, waiting: [], distance: d });
      expect(logged("相似图片扫描完成").map((l) => l.fields)).toEqual([{ compared: blobs.length, found: expected.length }]);
      expect(await scanRound(ctx.app)).toEqual({ compared: 0, found: 0 });
      expect(storedPairs(ctx.app.db)).toEqual(expected);
      // A round that found nothing says nothing.
      expect(logged("相似图片扫描完成")).toHaveLength(1);
    });

  test("blobs not ready wait: unhashed, pending delete, deleted meanwhile; a malformed hash is never compared", async () => {
    const a = add(BASE);
    const unhashed = add("");
    const pending = add(flip(BASE, 1), 1);
    const malformed = add(`${BASE}0`); // 17 digits
    const short = add(BASE.slice(1)); // 15 digits
    const gone = add("");
    const b = add(flip(BASE, 2, 3));
    expect(await scanRound(ctx.app)).toEqual({ compared: 2, found: 1 });
    expect(storedPairs(ctx.app.db)).toEqual([`${a}-${b}-2`]);
    expect(mark()).toEqual({ after: b, waiting: [unhashed, pending, gone], distance: 6 });

    ctx.app.db.query("UPDATE blobs SET phash = ? WHERE id = ?").run(flip(BASE, 4), unhashed);
    ctx.app.db.query("UPDATE blobs SET pending_delete = 0 WHERE id = ?").run(pending);
    ctx.app.db.query("DELETE FROM blobs WHERE id = ?").run(gone);
    expect(await scanRound(ctx.app)).toEqual({ compared: 2, found: 5 });
    expect(storedPairs(ctx.app.db)).toEqual(
      [`${a}-${b}-2`, `${a}-${unhashed}-1`, `${unhashed}-${b}-3`, `${a}-${pending}-1`, `${unhashed}-${pending}-2`, `${pending}-${b}-3`].sort(),
    );
    expect(mark()).toEqual({ after: b, waiting: [], distance: 6 });
    expect([malformed, short].every((id) => id < b)).toBe(true);
  });

  test("one blob still waiting and one new blob: the watermark moves past the new one", async () => {
    const a = add(BASE);
    const unhashed = add("");
    await scanRound(ctx.app);
    expect(mark()).toEqual({ after: unhashed, waiting: [unhashed], distance: 6 });
    const b = add(flip(BASE, 7));
    expect(await scanRound(ctx.app)).toEqual({ compared: 1, found: 1 });
    expect(mark()).toEqual({ after: b, waiting: [unhashed], distance: 6 });
    expect(await scanRound(ctx.app)).toEqual({ compared: 0, found: 0 });
    expect(storedPairs(ctx.app.db)).toEqual([`${a}-${b}-1`]);
  });

  test("a blob that goes pending delete waits again, and nothing else is written while nothing changes", async () => {
    const a = add(BASE);
    const b = add(flip(BASE, 9));
    await scanRound(ctx.app);
    // Written by hand in another key order: a round with nothing to do leaves the row as it is.
    const text = `{"waiting":[],"distance":6,"after":${b}}`;
    writeMeta(ctx.app.db, KEY, text);
    expect(await scanRound(ctx.app)).toEqual({ compared: 0, found: 0 });
    expect(readMeta(ctx.app.db, KEY)).toBe(text);

    ctx.app.db.query("UPDATE blobs SET pending_delete = 1 WHERE id = ?").run(a);
    expect(await scanRound(ctx.app)).toEqual({ compared: 0, found: 0 });
    expect(mark()).toEqual({ after: b, waiting: [a], distance: 6 });

    ctx.app.db.query("UPDATE blobs SET pending_delete = 0 WHERE id = ?").run(a);
    expect(await scanRound(ctx.app)).toEqual({ compared: 1, found: 0 });
    expect(mark()).toEqual({ after: b, waiting: [], distance: 6 });

    // A new blob alone (nothing else changed) moves the watermark on.
    const c = add(flip(BASE, 9, 10));
    expect(await scanRound(ctx.app)).toEqual({ compared: 1, found: 2 });
    expect(mark()).toEqual({ after: c, waiting: [], distance: 6 });
  });

  const watermarks: { rule: string; text: (after: number) => string; compared: number }[] = [
    { rule: "not JSON: a fresh start", text: () => "{", compared: 4 },
    { rule: "`after` not a whole number: a fresh start", text: (after) => `{"after":${after - 0.5},"waiting":[],"distance":6}`, compared: 4 },
    { rule: "`after` as text: a fresh start", text: (after) => `{"after":"${after}","waiting":[],"distance":6}`, compared: 4 },
    { rule: "`waiting` not a list: a fresh start", text: (after) => `{"after":${after},"waiting":5,"distance":6}`, compared: 4 },
    { rule: "`distance` as text: a fresh start", text: (after) => `{"after":${after},"waiting":[],"distance":"6"}`, compared: 4 },
    {
      rule: "a rescan note without `through`: a fresh start",
      text: (after) => `{"after":${after},"waiting":[],"distance":6,"rescan":{"distance":6}}`,
      compared: 4,
    },
    {
      rule: "a rescan note whose distance is text: a fresh start",
      text: (after) => `{"after":${after},"waiting":[],"distance":6,"rescan":{"distance":"6","through":1}}`,
      compared: 4,
    },
    { rule: "valid: nothing new", text: (after) => `{"after":${after},"waiting":[],"distance":6}`, compared: 0 },
    { rule: "valid, from a version without `distance`: nothing new", text: (after) => `{"after":${after},"waiting":[]}`, compared: 0 },
    {
      rule: "valid, with a rescan note: nothing new",
      text: (after) => `{"after":${after},"waiting":[],"distance":6,"rescan":{"distance":6,"through":1}}`,
      compared: 0,
    },
  ];
  for (const row of watermarks)
    test(`the watermark read back: ${row.rule}`, async () => {
      const ids = [BASE, flip(BASE, 1), flip(BASE, 30, 31), "0123456789abcdef"].map((h) => add(h));
      expect(await scanRound(ctx.app)).toEqual({ compared: 4, found: 3 });
      const after = ids.at(-1)!;
      writeMeta(ctx.app.db, KEY, row.text(after));
      expect(await scanRound(ctx.app)).toEqual({ compared: row.compared, found: 0 });
      expect(storedPairs(ctx.app.db)).toHaveLength(3);
      expect(logged("相似判定阈值已调大，正在后台重新扫描已索引的图片")).toEqual([]);
      if (row.compared) expect(mark()).toEqual({ after, waiting: [], distance: 6 });
    });

  test("a raised setting rescans what was compared with the smaller one; a lowered one is noted, so raising it again rescans", async () => {
    setDistance(4);
    const blobs = planted().map((phash) => ({ id: add(phash), phash }));
    await scanRound(ctx.app);
    expect(storedPairs(ctx.app.db)).toEqual(bruteForce(blobs, 4));
    setDistance(6);
    ctx.logs.length = 0;
    expect(await scanRound(ctx.app)).toEqual({ compared: 0, found: bruteForce(blobs, 6).length - bruteForce(blobs, 4).length });
    expect(storedPairs(ctx.app.db)).toEqual(bruteForce(blobs, 6));
    expect(logged("相似判定阈值已调大，正在后台重新扫描已索引的图片")).toHaveLength(1);
    expect(mark()).toEqual({ after: blobs.at(-1)!.id, waiting: [], distance: 6 });

    setDistance(3);
    expect(await scanRound(ctx.app)).toEqual({ compared: 0, found: 0 });
    expect(mark()).toEqual({ after: blobs.at(-1)!.id, waiting: [], distance: 3 });
    setDistance(6);
    ctx.logs.length = 0;
    expect(await scanRound(ctx.app)).toEqual({ compared: 0, found: 0 });
    expect(logged("相似判定阈值已调大，正在后台重新扫描已索引的图片")).toHaveLength(1);
    // The same setting again: nothing to rescan.
    ctx.logs.length = 0;
    expect(await scanRound(ctx.app)).toEqual({ compared: 0, found: 0 });
    expect(logged("相似判定阈值已调大，正在后台重新扫描已索引的图片")).toEqual([]);
  });

  test("nothing compared yet: a raised setting needs no rescan", async () => {
    writeMeta(ctx.app.db, KEY, '{"after":0,"waiting":[],"distance":3}');
    const blobs = planted().map((phash) => ({ id: add(phash), phash }));
    expect(await scanRound(ctx.app)).toEqual({ compared: blobs.length, found: bruteForce(blobs, 6).length });
    expect(logged("相似判定阈值已调大，正在后台重新扫描已索引的图片")).toEqual([]);
  });

  test("a rescan note at the current setting goes on after its `through`; one at another setting starts over", async () => {
    setDistance(4);
    const blobs = planted().map((phash) => ({ id: add(phash), phash }));
    await scanRound(ctx.app);
    const through = blobs[4]!.id;
    const after = blobs.at(-1)!.id;
    setDistance(6);
    writeMeta(ctx.app.db, KEY, JSON.stringify({ after, waiting: [], distance: 4, rescan: { distance: 6, through } }));
    await scanRound(ctx.app);
    const owner = (p: string) => Number(p.split("-")[1]);
    expect(storedPairs(ctx.app.db)).toEqual([...new Set([...bruteForce(blobs, 4), ...cappedPairs([blobs], 6).filter((p) => owner(p) > through)])].sort());
    expect(logged("继续上次中断的相似图片重新扫描").map((l) => l.fields)).toEqual([{ distance: 6, after: through }]);
    expect(mark()).toEqual({ after, waiting: [], distance: 6 });

    ctx.app.db.exec("DELETE FROM dedup_candidates");
    ctx.logs.length = 0;
    writeMeta(ctx.app.db, KEY, JSON.stringify({ after, waiting: [], distance: 4, rescan: { distance: 5, through } }));
    await scanRound(ctx.app);
    expect(storedPairs(ctx.app.db)).toEqual(bruteForce(blobs, 6));
    expect(logged("继续上次中断的相似图片重新扫描")).toEqual([]);
    expect(logged("相似判定阈值已调大，正在后台重新扫描已索引的图片")).toHaveLength(1);
  });

  describe("merge", () => {
    const pair = (a: number, b: number, d = 1) => {
      insertCandidate(ctx.app.db, a, b, d, "2026-01-01 00:00:00");
      return ctx.app.db.query<{ id: number }, [number, number]>("SELECT id FROM dedup_candidates WHERE blob_a = ? AND blob_b = ?").get(a, b)!.id;
    };
    const state = (id: number) => ctx.app.db.query<{ state: string }, [number]>("SELECT state FROM dedup_candidates WHERE id = ?").get(id)?.state;
    const pendingDelete = (id: number) => ctx.app.db.query<{ p: number }, [number]>("SELECT pending_delete AS p FROM blobs WHERE id = ?").get(id)!.p;
    const audits = () => ctx.app.db.query<{ action: string; target: string; detail: string }, []>("SELECT action, target, detail FROM audit ORDER BY id").all();

    const refusals: { rule: string; setup: (a: number, b: number, c: number) => [number, number]; answer: string }[] = [
      { rule: "an unknown pair", setup: () => [999_999, 1], answer: "NotFound: 相似候选不存在" },
      {
        rule: "a pair already decided",
        setup: (a, b) => {
          const id = pair(a, b);
          ctx.app.db.query("UPDATE dedup_candidates SET state = 'dismissed' WHERE id = ?").run(id);
          return [id, a];
        },
        answer: "Conflict: 该相似候选已处理",
      },
      { rule: "keeping a blob outside the pair", setup: (a, b, c) => [pair(a, b), c], answer: "Invalid: keep_blob_id 必须是该候选中的一方" },
      {
        rule: "the kept blob waits for its delete",
        setup: (a, b) => {
          ctx.app.db.query("UPDATE blobs SET pending_delete = 1 WHERE id = ?").run(a);
          return [pair(a, b), a];
        },
        answer: "Conflict: 候选中的图片已被删除，无法合并",
      },
      {
        rule: "the other blob waits for its delete",
        setup: (a, b) => {
          ctx.app.db.query("UPDATE blobs SET pending_delete = 1 WHERE id = ?").run(b);
          return [pair(a, b), a];
        },
        answer: "Conflict: 候选中的图片已被删除，无法合并",
      },
    ];
    for (const row of refusals)
      test(`refused: ${row.rule}`, () => {
        const [a, b, c] = [add(BASE), add(flip(BASE, 1)), add(flip(BASE, 2))];
        const [id, keep] = row.setup(a, b, c);
        const before = storedPairs(ctx.app.db);
        expect(outcome(() => merge(ctx.app, id, keep, SYSTEM_ACTOR))).toBe(row.answer);
        expect(storedPairs(ctx.app.db)).toEqual(before);
        expect(audits()).toEqual([]);
        expect(ctx.app.db.query("SELECT count(*) AS n FROM jobs").get()).toEqual({ n: 0 });
      });

    for (const keepSide of ["blob_a", "blob_b"] as const)
      test(`keeping ${keepSide}: the other waits for its delete, its other pending pairs are dismissed, the kept blob's stay`, () => {
        const [a, b, x, y] = [add(BASE), add(flip(BASE, 1)), add(flip(BASE, 2)), add(flip(BASE, 3))];
        const ab = pair(a, b);
        const [keep, removed] = keepSide === "blob_a" ? [a, b] : [b, a];
        const removedsOther = pair(Math.min(removed, x), Math.max(removed, x));
        const keptsOther = pair(Math.min(keep, y), Math.max(keep, y));
        const image = `img-${keepSide}`;
        ctx.app.db
          .query("INSERT INTO images (id, blob_id, user_id, file_name, created_at) VALUES (?, ?, ?, 'a.jpg', '2026-01-01 00:00:00')")
          .run(image, removed, "u1");
        // Delivery has the image's row cached: the merge makes it read the row again.
        expect(ctx.app.lookups.byId(image)?.blob_id).toBe(removed);
        merge(ctx.app, ab, keep, SYSTEM_ACTOR);
        expect(ctx.app.lookups.byId(image)?.blob_id).toBe(keep);
        expect([state(ab), state(removedsOther), state(keptsOther)]).toEqual(["merged", "dismissed", "pending"]);
        expect([pendingDelete(keep), pendingDelete(removed)]).toEqual([0, 1]);
        expect(audits()).toEqual([
          { action: "dedup.merge", target: String(ab), detail: JSON.stringify({ keep_blob_id: keep, removed_blob_id: removed, images: 1 }) },
        ]);
        expect(outcome(() => merge(ctx.app, ab, keep, SYSTEM_ACTOR))).toBe("Conflict: 该相似候选已处理");
      });

    /** Bits flipped from BASE: each partner's (a pending pair with the kept blob before the merge) and each unpaired newcomer's. */
    const refills: { rule: string; partners: number[][]; newcomers: number[][]; added: number[] }[] = [
      {
        rule: "19 pending pairs left: one more, the nearest unpaired, though the partners are nearer still",
        partners: Array.from({ length: 19 }, (_, i) => [i + 1]),
        newcomers: [
          [40, 41, 42],
          [43, 44, 45],
          [46, 47, 48],
        ],
        added: [0],
      },
      {
        rule: "20 pending pairs left: none",
        partners: Array.from({ length: 20 }, (_, i) => [i + 1]),
        newcomers: [
          [40, 41, 42],
          [43, 44, 45],
        ],
        added: [],
      },
      {
        rule: "21 pending pairs left (more than a scan gives): none, though unpaired blobs are nearer",
        partners: Array.from({ length: 21 }, (_, i) => [2 * i + 1, 2 * i + 2]),
        newcomers: [[50], [51], [52]],
        added: [],
      },
    ];
    for (const row of refills)
      test(`refill after a merge: ${row.rule}`, () => {
        const keep = add(BASE);
        const removed = add(flip(BASE, 0));
        const ab = pair(keep, removed);
        for (const bits of row.partners) pair(keep, add(flip(BASE, ...bits)), bits.length);
        const dismissedOne = add(flip(BASE, 60, 61));
        ctx.app.db.query("UPDATE dedup_candidates SET state = 'dismissed' WHERE id = ?").run(pair(keep, dismissedOne, 2));
        const newcomers = row.newcomers.map((bits) => ({ id: add(flip(BASE, ...bits)), d: bits.length }));
        add(flip(BASE, 53, 54, 55, 56, 57, 58, 59)); // 7 away: out of reach
        const index = new PhashIndex(ctx.app.db);
        for (const b of ctx.app.db.query<{ id: number; phash: string }, []>("SELECT id, phash FROM blobs").all()) index.add(b.id, phashToInt(b.phash));
        merge(ctx.app, ab, keep, SYSTEM_ACTOR);
        const added = ctx.app.db
          .query<{ p: string }, [number, number, string]>(
            "SELECT blob_a || '-' || blob_b || '-' || distance AS p FROM dedup_candidates WHERE (blob_a = ? OR blob_b = ?) AND created_at != ? ORDER BY id",
          )
          .all(keep, keep, "2026-01-01 00:00:00")
          .map((r) => r.p);
        expect(added).toEqual(row.added.map((k) => `${keep}-${newcomers[k]!.id}-${newcomers[k]!.d}`));
        expect(state(ab)).toBe("merged");
      });

    test("a kept blob without a hash merges without a refill", () => {
      const keep = add("");
      const removed = add(BASE);
      add(flip(BASE, 1));
      const ab = pair(keep, removed);
      merge(ctx.app, ab, keep, SYSTEM_ACTOR);
      expect(storedPairs(ctx.app.db)).toEqual([`${keep}-${removed}-1`]);
    });

    test("above distance 6 the kept blob waits for the next round's worker (once, in id order), unless the scan has not reached it", async () => {
      setDistance(8);
      const [a, b, w, c, d] = [BASE, flip(BASE, 1), flip(BASE, 20, 21, 22, 23, 24, 25, 26, 27), flip(BASE, 2), flip(BASE, 3)].map((h) => add(h)) as [
        number,
        number,
        number,
        number,
        number,
      ];
      await scanRound(ctx.app);
      expect(mark()).toEqual({ after: d, waiting: [], distance: 8 });
      const scanned = storedPairs(ctx.app.db);
      writeMeta(ctx.app.db, KEY, JSON.stringify({ after: d, waiting: [w], distance: 8 }));
      const idOf = (x: number, y: number) =>
        ctx.app.db.query<{ id: number }, [number, number]>("SELECT id FROM dedup_candidates WHERE blob_a = ? AND blob_b = ?").get(x, y)!.id;
      merge(ctx.app, idOf(a, b), a, SYSTEM_ACTOR);
      expect(mark()).toEqual({ after: d, waiting: [a, w], distance: 8 });
      // The last blob the scan reached is reached.
      merge(ctx.app, idOf(a, d), d, SYSTEM_ACTOR);
      expect(mark()).toEqual({ after: d, waiting: [a, w, d], distance: 8 });
      merge(ctx.app, idOf(c, d), d, SYSTEM_ACTOR);
      expect(mark()).toEqual({ after: d, waiting: [a, w, d], distance: 8 });
      // Kept blobs the scan has not reached yet are compared by it anyway.
      const e = add(flip(BASE, 4));
      const f = add(flip(BASE, 5));
      merge(ctx.app, pair(e, f), f, SYSTEM_ACTOR);
      expect(mark()).toEqual({ after: d, waiting: [a, w, d], distance: 8 });
      // No pair was added on the spot: the worker's round pairs them.
      expect(storedPairs(ctx.app.db)).toEqual([...scanned, `${e}-${f}-1`].sort());
    });
  });

  test("dismiss: the pair is never suggested again, even by a full rescan", async () => {
    const a = add(BASE);
    const b = add(flip(BASE, 5));
    await scanRound(ctx.app);
    const id = ctx.app.db.query<{ id: number }, []>("SELECT id FROM dedup_candidates").get()!.id;
    expect(outcome(() => dismiss(ctx.app, 999_999, SYSTEM_ACTOR))).toBe("NotFound: 相似候选不存在");
    dismiss(ctx.app, id, SYSTEM_ACTOR);
    expect(outcome(() => dismiss(ctx.app, id, SYSTEM_ACTOR))).toBe("Conflict: 该相似候选已处理");
    expect(ctx.app.db.query("SELECT action, target, detail FROM audit").all()).toEqual([
      { action: "dedup.dismiss", target: String(id), detail: JSON.stringify({ blob_a: a, blob_b: b }) },
    ]);
    deleteMeta(ctx.app.db, KEY);
    ctx.app.db.exec("DELETE FROM phash_index");
    expect(await scanRound(ctx.app)).toEqual({ compared: 2, found: 0 });
    expect(ctx.app.db.query("SELECT state FROM dedup_candidates").all()).toEqual([{ state: "dismissed" }]);
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

describe("a stop between slices", () => {
  const insertSql = `INSERT INTO blobs (sha256, phash, storage_key, mime, size, width, height, ref_count, pending_delete, created_at)
     VALUES (?, ?, 'k', 'image/jpeg', 1, 1, 1, 1, 0, '2026-01-01 00:00:00')`;
  const watermark = (app: { db: Database }) => JSON.parse(readMeta(app.db, "dedup_scan_watermark") ?? "null");

  test("among new blobs: the watermark keeps the pairs stored so far; the next start loses no pair", async () => {
    const dir = mkdtempSync(join(tmpdir(), "kura-dedup-rules-stop-"));
    let ctx = await openContext(dir);
    try {
      stopRescans(ctx.app);
      // Nothing to compare, a lowered setting: still noted, though the service is stopping.
      ctx.app.settings.update({ dedup_phash_max_distance: 5 });
      expect(await scanRound(ctx.app)).toEqual({ compared: 0, found: 0 });
      expect(watermark(ctx.app)).toEqual({ after: 0, waiting: [], distance: 5 });
      ctx.app.settings.update({ dedup_phash_max_distance: 6 });

      const insert = ctx.app.db.query(insertSql);
      const unhashed: number[] = [];
      let last = 0;
      ctx.app.db.transaction(() => {
        population(2000, rng(20261129)).forEach((h, i) => {
          last = Number(insert.run(`sha-${i}`, i % 50 === 7 ? "" : h).lastInsertRowid);
          if (i % 50 === 7) unhashed.push(last);
        });
      })();
      const first = await scanRound(ctx.app);
      const live = liveById(ctx.app.db);
      // A slice compares blobs for ~10 ms (far more than one) before it commits and yields.
      expect(first.compared).toBeGreaterThan(1);
      expect(first.compared).toBeLessThan(live.length);
      expect(ctx.logs.filter((l) => l.msg === "服务正在停止，相似图片扫描将在下次启动后继续").map((l) => l.fields)).toEqual([{ compared: first.compared }]);
      const saved = watermark(ctx.app);
      // The last blob read: the last one compared, or a blob not hashed yet read after it.
      expect(saved.after).toBeGreaterThanOrEqual(live[first.compared - 1]!.id);
      expect(saved.after).toBeLessThan(live[first.compared]!.id);
      expect(saved).toEqual({ after: saved.after, waiting: unhashed.filter((id) => id <= saved.after), distance: 6 });
      expect(storedPairs(ctx.app.db)).toEqual(cappedPairs([live.slice(0, first.compared)], 6));
      ctx.close();

      ctx = await openContext(dir);
      const second = await scanRound(ctx.app);
      expect(second.compared).toBe(live.length - first.compared);
      expect(storedPairs(ctx.app.db)).toEqual(cappedPairs([live], 6));
      expect(watermark(ctx.app)).toEqual({ after: last, waiting: unhashed, distance: 6 });
    } finally {
      ctx.close();
      rmSync(dir, { recursive: true, force: true });
    }
  }, 30_000);

  test("among waiting blobs: the ones not reached still wait, in id order with those not ready", async () => {
    const dir = mkdtempSync(join(tmpdir(), "kura-dedup-rules-stop-waiting-"));
    let ctx = await openContext(dir);
    try {
      const insert = ctx.app.db.query(insertSql);
      const ids: number[] = [];
      ctx.app.db.transaction(() => {
        for (let i = 0; i < 2000; i++) ids.push(Number(insert.run(`sha-${i}`, "").lastInsertRowid));
      })();
      expect(await scanRound(ctx.app)).toEqual({ compared: 0, found: 0 });
      expect(watermark(ctx.app)).toEqual({ after: ids.at(-1), waiting: ids, distance: 6 });
      // All hashed now but every 50th, which keeps waiting.
      const hashes = population(2000, rng(77));
      const setHash = ctx.app.db.query("UPDATE blobs SET phash = ? WHERE id = ?");
      const unhashed = ids.filter((_, i) => i % 50 === 7);
      ctx.app.db.transaction(() => {
        for (const [i, id] of ids.entries()) if (i % 50 !== 7) setHash.run(hashes[i]!, id);
      })();
      const live = liveById(ctx.app.db);

      stopRescans(ctx.app);
      const first = await scanRound(ctx.app);
      expect(first.compared).toBeGreaterThan(0);
      expect(first.compared).toBeLessThan(live.length);
      const notReached = new Set([...unhashed, ...live.slice(first.compared).map((b) => b.id)]);
      expect(watermark(ctx.app)).toEqual({ after: ids.at(-1), waiting: ids.filter((id) => notReached.has(id)), distance: 6 });
      expect(storedPairs(ctx.app.db)).toEqual(cappedPairs([live.slice(0, first.compared)], 6));
      ctx.close();

      ctx = await openContext(dir);
      expect((await scanRound(ctx.app)).compared).toBe(live.length - first.compared);
      expect(storedPairs(ctx.app.db)).toEqual(cappedPairs([live], 6));
      expect(watermark(ctx.app)).toEqual({ after: ids.at(-1), waiting: unhashed, distance: 6 });
    } finally {
      ctx.close();
      rmSync(dir, { recursive: true, force: true });
    }
  }, 30_000);
});
