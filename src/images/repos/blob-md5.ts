/**
 * A blob's MD5: the S3 ETag of every object naming it. Stored here, beside the blob, because
 * every upload surface records it (S3 PutObject while receiving, the form and compat uploads of
 * a keyed image afterwards) and S3 listings read it instead of hashing bytes.
 */
import type { Database } from "bun:sqlite";

/** Records a blob's MD5 the first time it is known (all references share the bytes). */
export function setBlobMd5(db: Database, blobId: number, md5: string) {
  db.query("UPDATE blobs SET md5 = ? WHERE id = ? AND md5 = ''").run(md5, blobId);
}

/** The blob's stored MD5 ('' when not known yet), undefined when the blob is gone. */
export function blobMd5(db: Database, blobId: number): string | undefined {
  return db.query<{ md5: string }, [number]>("SELECT md5 FROM blobs WHERE id = ?").get(blobId)?.md5;
}
