/** SQL of the perceptual-hash index (migration 0007, table phash_index): prepared once per index. */
import type { Database, Statement } from "bun:sqlite";

export type PhashRow = { blob_id: bigint; hash: bigint };

export interface PhashStatements {
  /** (chunk, value, blob_id, hash): one row per chunk of a blob's hash. */
  insert: Statement;
  /** The blobs whose hash has `value` in chunk `chunk`. */
  probe: Statement<PhashRow, [number, number]>;
}

/** Hashes come back as bigint (they are signed 64-bit). Blobs waiting for their physical delete are left out (they come back if revived). */
export function phashStatements(db: Database): PhashStatements {
  return {
    insert: db.query("INSERT OR IGNORE INTO phash_index (chunk, value, blob_id, hash) VALUES (?, ?, ?, ?)"),
    probe: db
      .query<PhashRow, [number, number]>(
        `SELECT p.blob_id, p.hash FROM phash_index p JOIN blobs b ON b.id = p.blob_id
         WHERE p.chunk = ? AND p.value = ? AND b.pending_delete = 0`,
      )
      .safeIntegers(true),
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
