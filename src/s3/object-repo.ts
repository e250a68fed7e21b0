/**
 * The S3 view of a user's images: every live image with an object_key is an object, its key the alias.
 * Keeps the two S3-only columns (blobs.md5 for ETags, images.s3_meta for x-amz-meta-* headers and the
 * ETag of an object completed from parts).
 */
import type { AppContext } from "../context";
import { folderByKey, isFolderKey } from "./folders";
import { multipartEtagOf } from "./object-meta";
import { hashBlob } from "./md5-backfill";
import type { S3Object } from "./object";
import { recordUploadMd5, setBlobMd5 } from "../images/repos/blob-md5";
import { selectObject, selectObjectsFrom, updateObjectMeta, userHasObjects } from "./repo";
import { validObjectKey } from "./request";

export type { S3Object } from "./object";
export { copyableMeta, parseMeta } from "./object-meta";

/** The image keyed `key`, or the folder marker when `key` ends in `/`. */
export function objectByKey(app: AppContext, userId: string, key: string): S3Object | undefined {
  if (isFolderKey(key)) return folderByKey(app, userId, key);
  if (!validObjectKey(key)) return undefined;
  return selectObject(app.db, userId, key);
}

/** Up to `limit` keys from `from` on (inclusive), in S3 (byte) order; SQLite's BINARY collation is UTF-8 byte order. */
export function objectsFrom(app: AppContext, userId: string, from: string, limit: number): S3Object[] {
  return selectObjectsFrom(app.db, userId, from, limit);
}

export function hasObjects(app: AppContext, userId: string): boolean {
  return userHasObjects(app.db, userId);
}

export function setObjectMeta(app: AppContext, imageId: string, meta: Record<string, string>) {
  updateObjectMeta(app.db, imageId, JSON.stringify(meta));
}

/** The object's ETag, quoted, as HEAD, GET and the conditions see it: the multipart ETag, else the MD5. */
export async function objectEtag(app: AppContext, object: S3Object): Promise<string> {
  return `"${multipartEtagOf(object) ?? (await md5Of(app, object))}"`;
}

/** Records a blob's MD5 the first time it is known (all references share the bytes). */
export function rememberMd5(app: AppContext, blobId: number, md5: string) {
  setBlobMd5(app.db, blobId, md5);
}

/** The MD5 an upload hashed while receiving the object's body: the blob's, and one the object's image knows (its ETag). */
export function rememberUploadMd5(app: AppContext, imageId: string, blobId: number, md5: string) {
  recordUploadMd5(app.db, imageId, blobId, md5);
}

/**
 * The blob's MD5 hex for one object (HEAD, GET, CopyObject); a blob stored without one is hashed once
 * from its bytes and remembered. Listings never call this: they use `listingEtag` (md5-backfill.ts).
 */
export async function md5Of(app: AppContext, object: S3Object): Promise<string> {
  if (object.md5) return object.md5;
  const md5 = await hashBlob(app, object.blob_id, object.storage_key);
  rememberMd5(app, object.blob_id, md5);
  object.md5 = md5;
  return md5;
}
