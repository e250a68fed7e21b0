/** SQL of the similar-image review: the blobs the scan compares and the dedup_candidates pairs. */
import type { Database } from "bun:sqlite";

/** A blob as the scan sees it. */
export interface ScanBlob {
  id: number;
  phash: string;
  pending_delete: number;
}

/** Blobs at or below `after` that cannot be compared yet (no hash, or pending delete); both sets are small partial indexes (migration 0007). */
export function notReadyBlobIds(db: Database, after: number): number[] {
  return db
    .query<{ id: number }, [number]>(
      "SELECT id FROM blobs WHERE id <= ?1 AND phash = '' UNION SELECT id FROM blobs WHERE id <= ?1 AND pending_delete = 1 ORDER BY id",
    )
    .all(after)
    .map((r) => r.id);
}

export function scanBlob(db: Database, id: number): ScanBlob | undefined {
  return db.query<ScanBlob, [number]>("SELECT id, phash, pending_delete FROM blobs WHERE id = ?").get(id) ?? undefined;
}

/** The highest blob id (0 without blobs). */
export function maxBlobId(db: Database): number {
  return db.query<{ id: number | null }, []>("SELECT max(id) AS id FROM blobs").get()?.id ?? 0;
}

/** Whether a blob with an id in (after, upTo] is ready to compare (hashed, not pending delete). */
export function anyReadyBetween(db: Database, after: number, upTo: number): boolean {
  return !!db.query("SELECT 1 FROM blobs WHERE id > ? AND id <= ? AND phash != '' AND pending_delete = 0 LIMIT 1").get(after, upTo);
}

/** The next `limit` blobs after `after` in id order. */
export function scanBlobsAfter(db: Database, after: number, limit: number): ScanBlob[] {
  return db.query<ScanBlob, [number, number]>("SELECT id, phash, pending_delete FROM blobs WHERE id > ? ORDER BY id LIMIT ?").all(after, limit);
}

/** Stores a pending pair (blob_a < blob_b) unless the pair is already known in any state; returns 1 when stored. */
export function insertCandidate(db: Database, blobA: number, blobB: number, distance: number, createdAt: string): number {
  return db
    .query("INSERT OR IGNORE INTO dedup_candidates (blob_a, blob_b, distance, state, created_at) VALUES (?, ?, ?, 'pending', ?)")
    .run(blobA, blobB, distance, createdAt).changes;
}

export interface CandidateRow {
  id: number;
  blob_a: number;
  blob_b: number;
  distance: number;
  state: string;
}

export function candidateById(db: Database, id: number): CandidateRow | undefined {
  return db.query<CandidateRow, [number]>("SELECT id, blob_a, blob_b, distance, state FROM dedup_candidates WHERE id = ?").get(id) ?? undefined;
}

export function setCandidateState(db: Database, id: number, state: "merged" | "dismissed"): void {
  db.query("UPDATE dedup_candidates SET state = ? WHERE id = ?").run(state, id);
}

/**
 * Dismisses the other pending pairs that name `blobId`. One statement per side, each on its own
 * index (migration 0014): with `blob_a = ? OR blob_b = ?` the planner may walk every pending pair.
 */
export function dismissOtherPairsOf(db: Database, exceptId: number, blobId: number): void {
  for (const side of ["blob_a", "blob_b"])
    db.query(`UPDATE dedup_candidates SET state = 'dismissed' WHERE ${side} = ?2 AND state = 'pending' AND id != ?1`).run(exceptId, blobId);
}

/** The blobs `blobId` has a pair with, in any state, and how many of those pairs are pending. */
export function pairPartners(db: Database, blobId: number): { partners: Set<number>; pending: number } {
  const rows = db
    .query<{ partner: number; state: string }, [number]>(
      "SELECT blob_b AS partner, state FROM dedup_candidates WHERE blob_a = ?1 UNION ALL SELECT blob_a, state FROM dedup_candidates WHERE blob_b = ?1",
    )
    .all(blobId);
  return { partners: new Set(rows.map((r) => r.partner)), pending: rows.filter((r) => r.state === "pending").length };
}

/**
 * Re-points every image of `fromBlobId` to `toBlobId`, whose ref_count grows by as many; returns the moved image ids.
 * Their uploads computed no digest of the kept blob's bytes: they show none of the ones it carries (own_digests, migration 0016).
 */
export function moveImagesToBlob(db: Database, fromBlobId: number, toBlobId: number): string[] {
  const moved = db
    .query<{ id: string }, [number]>("SELECT id FROM images WHERE blob_id = ?")
    .all(fromBlobId)
    .map((r) => r.id);
  db.query("UPDATE images SET blob_id = ?, own_digests = 0 WHERE blob_id = ?").run(toBlobId, fromBlobId);
  db.query("UPDATE blobs SET ref_count = ref_count + ? WHERE id = ?").run(moved.length, toBlobId);
  return moved;
}
