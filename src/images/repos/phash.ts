/** SQL of the perceptual-hash index (migration 0007, table phash_index): prepared once per index. */
import type { Database, Statement } from "bun:sqlite";

export type PhashRow = { blob_id: bigint; hash: bigint };

export interface PhashStatements {
  /** (chunk, value, blob_id, hash): one row per chunk of a blob's hash. */
  insert: Statement;
  /** The blobs whose hash has `value` in chunk `chunk` (pending deletes included: see `pendingDelete`). */
  probe: Statement<PhashRow, [number, number]>;
  /** A row when the blob waits for its physical delete. */
  pendingDelete: Statement<{ one: number }, [number]>;
}

/**
 * Hashes come back as bigint (they are signed 64-bit). The probe reads the index alone: joining
 * each of its rows to blobs (to leave out pending deletes) cost ~30 ms a probe at a million blobs
 * (~10k random blob reads), for the few rows within the distance that need it; the caller asks
 * `pendingDelete` for those.
 */
export function phashStatements(db: Database): PhashStatements {
  return {
    insert: db.query("INSERT OR IGNORE INTO phash_index (chunk, value, blob_id, hash) VALUES (?, ?, ?, ?)"),
    probe: db.query<PhashRow, [number, number]>("SELECT blob_id, hash FROM phash_index WHERE chunk = ? AND value = ?").safeIntegers(true),
    pendingDelete: db.query<{ one: number }, [number]>("SELECT 1 AS one FROM blobs WHERE id = ? AND pending_delete = 1"),
  };
}

/** Which of `ids` are still blobs waiting for a hash (not deleted, not hashed, not pending delete). */
export function stillUnhashed(db: Database, ids: number[]): Set<number> {
  const found = new Set<number>();
  const lookup = db.query<{ id: number }, [string]>("SELECT id FROM blobs WHERE id IN (SELECT value FROM json_each(?)) AND phash = '' AND pending_delete = 0");
  // Chunks keep each statement small however many blobs keep failing.
  for (let i = 0; i < ids.length; i += 500) for (const r of lookup.all(JSON.stringify(ids.slice(i, i + 500)))) found.add(r.id);
  return found;
}

/** Unhashed blobs created at or before `createdBefore`, oldest first (the partial index `blobs_unhashed`). */
export function dueUnhashedBlobIds(db: Database, createdBefore: string, limit: number): number[] {
  return db
    .query<{ id: number }, [string, number]>("SELECT id FROM blobs WHERE phash = '' AND pending_delete = 0 AND created_at <= ? ORDER BY id LIMIT ?")
    .all(createdBefore, limit)
    .map((r) => r.id);
}

/**
 * The statements of the pair-finding worker (dedup-pairs-worker.ts), which opens its own
 * read-only connection: `waiting` (blobs by a JSON array of ids) and `range` (ids in (after,
 * upTo]) read the blobs new to a round, `indexed` every indexed hash of a live blob, in id order.
 */
export const PAIRS_WORKER_SQL = {
  waiting: "SELECT id, phash, pending_delete FROM blobs WHERE id IN (SELECT value FROM json_each(?)) ORDER BY id",
  range: "SELECT id, phash, pending_delete FROM blobs WHERE id > ? AND id <= ? ORDER BY id",
  indexed:
    "SELECT p.blob_id AS id, p.hash AS hash FROM phash_index p JOIN blobs b ON b.id = p.blob_id WHERE p.chunk = 0 AND b.pending_delete = 0 ORDER BY p.blob_id",
} as const;
