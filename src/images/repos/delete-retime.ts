/**
 * SQL of re-timing physical deletes after a change of `delete_grace_minutes` (delete.ts). A
 * pending delete's start is the `created_at` of its `blob.delete` job (written in the same
 * transaction as `pending_delete`, see scheduleBlobDelete); every statement here is an index
 * range: the partial index `blobs_pending_delete` and the unique index of unfinished jobs.
 */
import type { Database } from "bun:sqlite";
import { BLOB_DELETE_JOB } from "../job-names";

/** `blob-delete:<id>:<runAt>`: the unique key scheduleBlobDelete gives each delete job of a blob. */
export const blobDeleteKey = (blobId: number, runAt: number) => `blob-delete:${blobId}:${runAt}`;
// Every key of one blob sorts in [`blob-delete:<id>:`, `blob-delete:<id>;`) (';' follows ':').
const keyRange = (blobId: number): [string, string] => [`blob-delete:${blobId}:`, `blob-delete:${blobId};`];
// Names the condition of jobs_unique_pending (migration 0002) so the planner can use it.
const UNFINISHED_KEYED = `kind = '${BLOB_DELETE_JOB}' AND unique_key IS NOT NULL AND state IN ('available','scheduled','running','retryable')`;

/** The next `limit` blobs waiting for their physical delete after `after`, in id order. */
export function pendingDeleteBlobIds(db: Database, after: number, limit: number): number[] {
  return db
    .query<{ id: number }, [number, number]>("SELECT id FROM blobs WHERE pending_delete = 1 AND id > ? ORDER BY id LIMIT ?")
    .all(after, limit)
    .map((r) => r.id);
}

/** When the blob's last reference went (ms): its newest unfinished delete job's creation; undefined without one. */
export function deleteStartedAt(db: Database, blobId: number): number | undefined {
  const row = db
    .query<{ at: number | null }, [string, string]>(`SELECT max(created_at) AS at FROM jobs WHERE ${UNFINISHED_KEYED} AND unique_key >= ? AND unique_key < ?`)
    .get(...keyRange(blobId));
  return row?.at ?? undefined;
}

/**
 * Sets the blob's `delete_after` and the run time of its waiting delete jobs (a running one is
 * left alone) to `runAt`; a job whose time has not come is `scheduled`, one that is due `available`.
 */
export function retimeBlobDelete(db: Database, blobId: number, deleteAfter: string, runAt: number, now: number): void {
  db.query("UPDATE blobs SET delete_after = ? WHERE id = ? AND pending_delete = 1").run(deleteAfter, blobId);
  db.query(
    `UPDATE jobs SET run_at = ?1, updated_at = ?2,
       state = CASE WHEN state = 'retryable' THEN state WHEN ?1 > ?2 THEN 'scheduled' ELSE 'available' END
     WHERE ${UNFINISHED_KEYED} AND unique_key >= ?3 AND unique_key < ?4 AND state != 'running'`,
  ).run(runAt, now, ...keyRange(blobId));
}
