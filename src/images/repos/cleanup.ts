/**
 * SQL of the cleanup sweep: expired references, and the cold marks of the cleanup review. Each
 * statement names the condition of its partial index (migration 0007; an exempt image is never
 * flagged) and changes at most `limit` rows, so the caller can yield between batches.
 */
import type { Database } from "bun:sqlite";
import { COLD_MARK } from "../cleanup-reason";

/** Up to `limit` images whose expiry is at or before `now` (SQL time). */
export function expiredImageIds(db: Database, now: string, limit: number): { id: string }[] {
  return db.query<{ id: string }, [string, number]>("SELECT id FROM images WHERE expire_at IS NOT NULL AND expire_at <= ? LIMIT ?").all(now, limit);
}

/**
 * Takes the cold mark off up to `limit` listed images: those accessed (or created) at or after
 * `cutoff`, or every cold-marked one when there is no cutoff. Returns how many changed.
 */
export function unflagColdBatch(db: Database, cutoff: string | undefined, limit: number): number {
  const statement = cutoff
    ? db.query(
        `UPDATE images SET pending_cleanup = 0 WHERE rowid IN (SELECT rowid FROM images
           WHERE pending_cleanup = 1 AND cleanup_exempt = 0 AND ${COLD_MARK} AND COALESCE(last_public_access_at, created_at) >= ?1 LIMIT ?2)`,
      )
    : db.query(
        `UPDATE images SET pending_cleanup = 0 WHERE rowid IN (SELECT rowid FROM images
           WHERE pending_cleanup = 1 AND cleanup_exempt = 0 AND ${COLD_MARK} LIMIT ?2)`,
      );
  return statement.run(cutoff ?? "", limit).changes;
}

/** Flags up to `limit` unlisted images last accessed (or created) before `cutoff` as cold. Returns how many changed. */
export function flagColdBatch(db: Database, cutoff: string, limit: number): number {
  return db
    .query(
      `UPDATE images SET pending_cleanup = 1, cleanup_reason = 'cold' WHERE rowid IN (SELECT rowid FROM images
         WHERE pending_cleanup = 0 AND cleanup_exempt = 0 AND COALESCE(last_public_access_at, created_at) < ?1 LIMIT ?2)`,
    )
    .run(cutoff, limit).changes;
}
