/** SQL of image references: one more image row pointing at an existing blob. */
import type { Database } from "bun:sqlite";

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
}

export function insertImageRow(db: Database, row: NewImageRow): void {
  db.query(
    `INSERT INTO images (id, blob_id, user_id, token_id, file_name, object_key, expire_at, ttl_seconds, created_at)
     VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
  ).run(row.id, row.blobId, row.userId, row.tokenId, row.fileName, row.objectKey, row.expireAt, row.ttlSeconds, row.createdAt);
}
