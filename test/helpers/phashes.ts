/** Perceptual-hash populations for the dedup tests: seeded clusters of near-duplicates and a brute-force pair list. */
import type { Database } from "bun:sqlite";

/** mulberry32: a fixed-seed generator, so the hash population is the same every run. */
export function rng(seed: number) {
  return () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

export const hex64 = (n: bigint) => BigInt.asUintN(64, n).toString(16).padStart(16, "0");

/** Clusters of near-duplicates: a base hash and variants 0–9 bits away, so pairs fall on both sides of 6. */
export function population(count: number, random: () => number): string[] {
  const out: string[] = [];
  while (out.length < count) {
    const base = (BigInt(Math.floor(random() * 2 ** 32)) << 32n) | BigInt(Math.floor(random() * 2 ** 32));
    const variants = 1 + Math.floor(random() * 8);
    for (let v = 0; v < variants && out.length < count; v++) {
      let h = base;
      const flips = Math.floor(random() * 10);
      for (let f = 0; f < flips; f++) h ^= 1n << BigInt(Math.floor(random() * 64));
      out.push(hex64(h));
    }
  }
  return out;
}

export function popcount32(x: number): number {
  let c = 0;
  for (; x; x &= x - 1) c++;
  return c;
}

/** The hash as two 32-bit halves (independent of the BigInt code under test). */
export const halves = (b: { id: number; phash: string }) => ({ id: b.id, hi: parseInt(b.phash.slice(0, 8), 16) | 0, lo: parseInt(b.phash.slice(8), 16) | 0 });

/** Every pair, compared on two 32-bit halves, as sorted "a-b-distance" strings (a < b). */
export function bruteForce(blobs: { id: number; phash: string }[], maxDistance: number): string[] {
  const pairs: string[] = [];
  const hs = blobs.map(halves);
  for (let i = 0; i < hs.length; i++) {
    const a = hs[i]!;
    for (let j = i + 1; j < hs.length; j++) {
      const b = hs[j]!;
      const d = popcount32(a.hi ^ b.hi) + popcount32(a.lo ^ b.lo);
      if (d <= maxDistance) pairs.push(`${Math.min(a.id, b.id)}-${Math.max(a.id, b.id)}-${d}`);
    }
  }
  return pairs.sort();
}

/** The ready blobs (hashed, not pending delete). */
export const liveBlobs = (db: Database) =>
  db.query<{ id: number; phash: string }, []>("SELECT id, phash FROM blobs WHERE phash != '' AND pending_delete = 0").all();

/** Every stored pair as a sorted "a-b-distance" string. */
export const storedPairs = (db: Database) =>
  db
    .query<{ p: string }, []>("SELECT blob_a || '-' || blob_b || '-' || distance AS p FROM dedup_candidates")
    .all()
    .map((r) => r.p)
    .sort();

/** Inserts blobs with the given hash ('' for not hashed yet); returns the new id. */
export function blobInserter(db: Database): (phash: string, pendingDelete?: number) => number {
  const insert = db.query(
    `INSERT INTO blobs (sha256, phash, storage_key, mime, size, width, height, ref_count, pending_delete, created_at)
     VALUES (?, ?, 'k', 'image/jpeg', 1, 1, 1, 1, ?, '2026-01-01 00:00:00')`,
  );
  return (phash, pendingDelete = 0) => Number(insert.run(`sha-${crypto.randomUUID()}`, phash, pendingDelete).lastInsertRowid);
}

/**
 * The pairs scans store with the per-blob cap (dedup-rescan.ts PAIRS_PER_BLOB), computed by
 * brute force: `rounds` are the blobs in the order the scans compared them (round after round);
 * each blob, at its turn, is paired with its `cap` nearest within `maxDistance` (ties: the lower
 * id) of the blobs compared before it. A full rescan is one round of the indexed blobs in id order.
 */
export function cappedPairs(rounds: { id: number; phash: string }[][], maxDistance: number, cap = 20): string[] {
  const pairs: string[] = [];
  const before: ReturnType<typeof halves>[] = [];
  for (const round of rounds) {
    for (const blob of round) {
      const a = halves(blob);
      const near: { id: number; d: number }[] = [];
      for (const b of before) {
        const d = popcount32(a.hi ^ b.hi) + popcount32(a.lo ^ b.lo);
        if (d <= maxDistance) near.push({ id: b.id, d });
      }
      near.sort((x, y) => x.d - y.d || x.id - y.id);
      for (const n of near.slice(0, cap)) pairs.push(`${Math.min(a.id, n.id)}-${Math.max(a.id, n.id)}-${n.d}`);
      before.push(a);
    }
  }
  return pairs.sort();
}

/** The ready blobs in id order. */
export const liveById = (db: Database) => liveBlobs(db).sort((a, b) => a.id - b.id);

export const U64 = (1n << 64n) - 1n;
/** `hex` with the given bits (0 = least significant) flipped. */
export const flip = (hex: string, ...bits: number[]) => hex64(bits.reduce((h, b) => h ^ (1n << BigInt(b)), BigInt(`0x${hex}`)));
/** Differing bits counted on the hex text, independent of the BigInt code under test. */
export const textDistance = (a: string, b: string) => [...a].reduce((n, c, i) => n + popcount32(Number.parseInt(c, 16) ^ Number.parseInt(b[i]!, 16)), 0);
/** What `run` answers: its value as text, or the error's class and message. */
export const outcome = (run: () => unknown) => {
  try {
    return String(run());
  } catch (err) {
    return `${(err as Error).constructor.name}: ${(err as Error).message}`;
  }
};
