/** SQL of image references: image rows pointing at a blob, added and removed with the blob's ref_count. */
import type { Database } from "bun:sqlite";
import { sha256OfStorageKey } from "../storage-key";

/** One more reference to the blob; a blob waiting for physical delete is kept after all. */
export function addBlobReference(db: Database, blobId: number): void {
  db.query("UPDATE blobs SET ref_count = ref_count + 1, pending_delete = 0, delete_after = NULL WHERE id = ?").run(blobId);
}

export interface NewImageRow {
  id: string;
  blobId: number;
  userId: string;
  tokenId: number | null;
  fileName: string;
  objectKey: string | null;
  expireAt: string | null;
  ttlSeconds: number | null;
  createdAt: string;
  /**
   * Which of the blob's digests this reference's own upload computed (OWN_MD5 | OWN_SHA1, blob-md5.ts):
   * named by every new row (the column's default is for rows from before migration 0016). An upload
   * inserts 0 and marks what it computes once it has recorded it.
   */
  ownDigests: number;
}

export function insertImageRow(db: Database, row: NewImageRow): void {
  db.query(
    // blob_size (migration 0013) from the blob's row, which the upload has just read or written.
    `INSERT INTO images (id, blob_id, user_id, token_id, file_name, object_key, expire_at, ttl_seconds, created_at, own_digests, blob_size)
     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, (SELECT size FROM blobs WHERE id = ?2))`,
  ).run(row.id, row.blobId, row.userId, row.tokenId, row.fileName, row.objectKey, row.expireAt, row.ttlSeconds, row.createdAt, row.ownDigests);
}

/** The image's own_digests (0 when it is gone): what a copy of it knows of its bytes. */
export function ownDigestsOfImage(db: Database, imageId: string): number {
  return db.query<{ own_digests: number }, [string]>("SELECT own_digests FROM images WHERE id = ?").get(imageId)?.own_digests ?? 0;
}

export function blobIdOfImage(db: Database, imageId: string): number | undefined {
  return db.query<{ blob_id: number }, [string]>("SELECT blob_id FROM images WHERE id = ?").get(imageId)?.blob_id;
}

/** Deletes the image row and drops its blob's reference count by one. */
export function removeImageReference(db: Database, imageId: string, blobId: number): void {
  db.query("DELETE FROM images WHERE id = ?").run(imageId);
  db.query("UPDATE blobs SET ref_count = ref_count - 1 WHERE id = ?").run(blobId);
}

/** An unreferenced blob waits for its physical delete until `deleteAfter` (a re-upload revives it). */
export function markBlobPendingDelete(db: Database, blobId: number, deleteAfter: string): void {
  db.query("UPDATE blobs SET ref_count = 0, pending_delete = 1, delete_after = ? WHERE id = ?").run(deleteAfter, blobId);
}

/**
 * The blob stored under `storageKey`, if any. Keys made by storageKeyFor carry the blob's
 * sha256, so the lookup uses its index (blobs has no storage_key index since migration 0010).
 * Any other key is looked up by a scan: none should exist, and crash recovery must never take
 * an owned object for an orphan.
 */
export function blobIdByStorageKey(db: Database, storageKey: string): number | undefined {
  const sha256 = sha256OfStorageKey(storageKey);
  if (sha256 === undefined) return db.query<{ id: number }, [string]>("SELECT id FROM blobs WHERE storage_key = ?").get(storageKey)?.id;
  return db.query<{ id: number }, [string, string]>(BLOB_BY_HASHED_KEY_SQL).get(sha256, storageKey)?.id;
}

/** blobIdByStorageKey's read for keys made by storageKeyFor: one probe of the sha256 index. */
export const BLOB_BY_HASHED_KEY_SQL = "SELECT id FROM blobs WHERE sha256 = ? AND storage_key = ?";

/** A new blob with one reference and no perceptual hash yet; returns its id. */
export function insertBlobRow(
  db: Database,
  b: { sha256: string; storageKey: string; mime: string; size: number; width: number; height: number; createdAt: string },
): number {
  const res = db
    .query(
      `INSERT INTO blobs (sha256, phash, storage_key, mime, size, width, height, ref_count, created_at)
       VALUES (?, '', ?, ?, ?, ?, ?, 1, ?)`,
    )
    .run(b.sha256, b.storageKey, b.mime, b.size, b.width, b.height, b.createdAt);
  return Number(res.lastInsertRowid);
}
