/**
 * A blob's MD5: the S3 ETag of every object naming it. Stored here, beside the blob, because
 * every upload surface records it (S3 PutObject while receiving, the form and compat uploads of
 * a keyed image afterwards) and S3 listings read it instead of hashing bytes. Its SHA-1
 * (migration 0015) is kept the same way where an upload computed it, for the Lsky image list.
 *
 * Every reference shares these, whoever's upload computed them; an image shows a user only those
 * its own upload computed (`images.own_digests`, migration 0016, audit LOW-2): whether anyone else
 * stored the same bytes is not theirs to learn.
 */
import type { Database } from "bun:sqlite";
import { inWriteTransaction } from "../../db/write-transaction";

/** Records a blob's MD5 the first time it is known (all references share the bytes). */
export function setBlobMd5(db: Database, blobId: number, md5: string) {
  db.query("UPDATE blobs SET md5 = ? WHERE id = ? AND md5 = ''").run(md5, blobId);
}

/** The blob's stored MD5 ('' when not known yet), undefined when the blob is gone. */
export function blobMd5(db: Database, blobId: number): string | undefined {
  return db.query<{ md5: string }, [number]>("SELECT md5 FROM blobs WHERE id = ?").get(blobId)?.md5;
}

/** `images.own_digests`: the image's own upload computed its blob's MD5 (an S3 upload: the object's ETag). */
export const OWN_MD5 = 1;
/** `images.own_digests`: the image's own upload computed its blob's SHA-1 too (Lsky, Chevereto and keyed uploads). */
export const OWN_SHA1 = 2;

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

/**
 * An upload computed MD5 and SHA-1 of the bytes of `imageId`'s blob: kept with the blob, and the image
 * marked as knowing both. Marked only once recorded: until then the blob's digests, which another
 * reference's upload may have stored, are not this image's to show.
 */
export function recordUploadDigests(db: Database, imageId: string, blobId: number, digests: { md5: string; sha1: string }) {
  inWriteTransaction(db, () => {
    setBlobDigests(db, blobId, digests);
    db.query("UPDATE images SET own_digests = ?1 WHERE id = ?2").run(OWN_MD5 | OWN_SHA1, imageId);
  });
}

/** An S3 upload hashed its body while receiving it: the blob's MD5, and the image marked as knowing it. */
export function recordUploadMd5(db: Database, imageId: string, blobId: number, md5: string) {
  inWriteTransaction(db, () => {
    setBlobMd5(db, blobId, md5);
    db.query("UPDATE images SET own_digests = own_digests | ?1 WHERE id = ?2").run(OWN_MD5, imageId);
  });
}

/** What `stored` (a blob's digests) the image may show: those its own upload computed (`own`, its own_digests), '' for the rest. */
export function ownDigests(own: number, stored: { md5: string; sha1: string } | undefined): { md5: string; sha1: string } {
  return { md5: own & OWN_MD5 ? (stored?.md5 ?? "") : "", sha1: own & OWN_SHA1 ? (stored?.sha1 ?? "") : "" };
}
