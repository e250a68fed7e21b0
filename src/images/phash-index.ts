import type { Database } from "bun:sqlite";
import { type PhashRow, type PhashStatements, phashStatements } from "./repos/phash";

/**
 * Multi-index hashing over 64-bit perceptual hashes (migration 0007, table phash_index).
 * The hash is cut into 7 chunks (10 + 6×9 bits); two hashes within Hamming distance 6
 * differ in at most 6 chunks, so they agree exactly on at least one. A lookup therefore
 * probes 7 (chunk, value) keys and compares only the blobs found there, instead of every
 * hash in the library.
 */
export const CHUNK_BITS = [10, 9, 9, 9, 9, 9, 9] as const;
/** Largest distance the 7-chunk index answers exactly (pigeonhole: chunks − 1). */
export const MIH_MAX_DISTANCE = CHUNK_BITS.length - 1;

export const PHASH_HEX = /^[0-9a-fA-F]{16}$/;

/** The hash as SQLite stores it: a signed 64-bit integer. */
export function phashToInt(hex: string): bigint {
  return BigInt.asIntN(64, BigInt(`0x${hex}`));
}

export function phashChunks(hash: bigint): number[] {
  let u = BigInt.asUintN(64, hash);
  const out: number[] = [];
  for (const bits of CHUNK_BITS) {
    out.push(Number(u & ((1n << BigInt(bits)) - 1n)));
    u >>= BigInt(bits);
  }
  return out;
}

function popcount32(x: number): number {
  x -= (x >>> 1) & 0x55555555;
  x = (x & 0x33333333) + ((x >>> 2) & 0x33333333);
  return (((x + (x >>> 4)) & 0x0f0f0f0f) * 0x01010101) >>> 24;
}

export function hamming(a: bigint, b: bigint): number {
  const x = BigInt.asUintN(64, a ^ b);
  return popcount32(Number(x & 0xffffffffn)) + popcount32(Number(x >> 32n));
}

export interface Neighbour {
  blobId: number;
  distance: number;
}

export class PhashIndex {
  private readonly sql: PhashStatements;

  constructor(db: Database) {
    this.sql = phashStatements(db);
  }

  add(blobId: number, hash: bigint) {
    phashChunks(hash).forEach((value, chunk) => {
      this.sql.insert.run(chunk, value, blobId, hash);
    });
  }

  /**
   * The `limit` indexed blobs nearest to `hash` within `maxDistance` (other than `self`, and not
   * waiting for their physical delete), nearest first (ties: the lower id): 7 index probes, then
   * a pending-delete check for the nearest rows only. The index cannot answer a larger distance
   * than MIH_MAX_DISTANCE (that would compare every hash on the caller's thread); dedup.ts
   * compares those in a worker (dedup-rescan.ts).
   */
  near(hash: bigint, maxDistance: number, self: number, limit = Number.POSITIVE_INFINITY): Neighbour[] {
    if (maxDistance > MIH_MAX_DISTANCE) throw new RangeError(`PhashIndex.near answers distances up to ${MIH_MAX_DISTANCE}, not ${maxDistance}`);
    const seen = new Set<number>([self]);
    const within: Neighbour[] = [];
    const consider = (row: PhashRow) => {
      const blobId = Number(row.blob_id);
      if (seen.has(blobId)) return;
      seen.add(blobId);
      const distance = hamming(hash, row.hash);
      if (distance <= maxDistance) within.push({ blobId, distance });
    };
    phashChunks(hash).forEach((value, chunk) => {
      for (const row of this.sql.probe.iterate(chunk, value)) consider(row);
    });
    within.sort((a, b) => a.distance - b.distance || a.blobId - b.blobId);
    const out: Neighbour[] = [];
    for (const n of within) {
      if (out.length >= limit) break;
      if (!this.sql.pendingDelete.get(n.blobId)) out.push(n);
    }
    return out;
  }
}
