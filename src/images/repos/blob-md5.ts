/**
 * A blob's MD5: the S3 ETag of every object naming it. Stored here, beside the blob, because
 * every upload surface records it (S3 PutObject while receiving, the form and compat uploads of
 * a keyed image afterwards) and S3 listings read it instead of hashing bytes. Its SHA-1
 * (migration 0015) is kept the same way where an upload computed it, for the Lsky image list.
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

/** Records MD5 and SHA-1 of a blob's bytes, each the first time it is known. */
export function setBlobDigests(db: Database, blobId: number, digests: { md5: string; sha1: string }) {
  db.query("UPDATE blobs SET md5 = CASE md5 WHEN '' THEN ?1 ELSE md5 END, sha1 = CASE sha1 WHEN '' THEN ?2 ELSE sha1 END WHERE id = ?3").run(
    digests.md5,
    digests.sha1,
    blobId,
  );
}

/** The stored MD5 and SHA-1 ('' when not known) of the given blobs, by blob id: primary-key reads, no bytes. */
export function blobDigests(db: Database, blobIds: readonly number[]): Map<number, { md5: string; sha1: string }> {
  const rows = db
    .query<{ id: number; md5: string; sha1: string }, [string]>("SELECT id, md5, sha1 FROM blobs WHERE id IN (SELECT value FROM json_each(?))")
    .all(JSON.stringify(blobIds));
  return new Map(rows.map((r) => [r.id, { md5: r.md5, sha1: r.sha1 }]));
}
