/**
 * SQL of the admin review lists (spec 4.9): similar pairs awaiting a decision, and images
 * on the cleanup list. Decisions themselves (merge, dismiss) are in ../dedup.ts.
 */
import type { Database } from "bun:sqlite";

/**
 * FROM/WHERE of the pairs that can still be merged: both blobs live and referenced. A pair
 * whose blob lost its last reference stays pending but would have no image to show. The
 * review list and the dashboard's `pending_dedup` both count from it, so they agree.
 */
export const LISTABLE_DEDUP = `
  FROM dedup_candidates c JOIN blobs a ON a.id = c.blob_a JOIN blobs b ON b.id = c.blob_b
  WHERE c.state = 'pending' AND a.pending_delete = 0 AND b.pending_delete = 0
    AND EXISTS (SELECT 1 FROM images WHERE blob_id = c.blob_a) AND EXISTS (SELECT 1 FROM images WHERE blob_id = c.blob_b)`;

export interface Page {
  limit: number;
  offset: number;
}

/** One side of a pair: the blob and the oldest image that shows it. */
export interface SideRow {
  blob_id: number;
  image_id: string;
  mime: string;
  size: number;
  width: number;
  height: number;
  refs: number;
}

function side(db: Database, blobId: number): SideRow {
  return db
    .query<SideRow, [number]>(
      `SELECT b.id AS blob_id, (SELECT id FROM images WHERE blob_id = b.id ORDER BY created_at, rowid LIMIT 1) AS image_id,
              b.mime, b.size, b.width, b.height, b.ref_count AS refs
       FROM blobs b WHERE b.id = ?`,
    )
    .get(blobId)!;
}

/** Pending pairs whose both blobs still have images; closest pairs first (the likeliest true duplicates). */
export function listDedupPairs(db: Database, page: Page) {
  const total = db.query<{ n: number }, []>(`SELECT COUNT(*) AS n ${LISTABLE_DEDUP}`).get()!.n;
  const rows = db
    .query<{ id: number; distance: number; created_at: string; blob_a: number; blob_b: number }, [number, number]>(
      `SELECT c.id, c.distance, c.created_at, c.blob_a, c.blob_b ${LISTABLE_DEDUP} ORDER BY c.distance, c.id LIMIT ? OFFSET ?`,
    )
    .all(page.limit, page.offset);
  const items = rows.map((r) => ({ id: r.id, distance: r.distance, created_at: r.created_at, a: side(db, r.blob_a), b: side(db, r.blob_b) }));
  return { items, total };
}

/**
 * Images on the cleanup list and not exempt. Longest-unused first: never-accessed images count
 * from their upload time. Superseded images (an object_key re-pointed to a later upload) are
 * listed with reason "superseded".
 */
export function listCleanup(db: Database, page: Page) {
  const where = "WHERE i.pending_cleanup = 1 AND i.cleanup_exempt = 0";
  const total = db.query<{ n: number }, []>(`SELECT COUNT(*) AS n FROM images i ${where}`).get()!.n;
  const items = db
    .query<Record<string, unknown>, [number, number]>(
      `SELECT i.id, '/i/' || i.id AS url, i.user_id, i.file_name, b.mime, b.size, b.width, b.height,
              i.last_public_access_at AS last_access_at, i.created_at, COALESCE(i.cleanup_reason, 'cold') AS reason
       FROM images i JOIN blobs b ON b.id = i.blob_id ${where}
       ORDER BY COALESCE(i.last_public_access_at, i.created_at), i.rowid LIMIT ? OFFSET ?`,
    )
    .all(page.limit, page.offset);
  return { items, total };
}
