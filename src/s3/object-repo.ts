/**
 * The S3 view of a user's images: every live image with an object_key is an object, its key the alias.
 * Keeps the two S3-only columns (blobs.md5 for ETags, images.s3_meta for x-amz-meta-* headers).
 */
import { createHash } from "node:crypto";
import type { AppContext } from "../context";
import { sqlTime } from "../db/time";
import { openBlob } from "../images/read";
import { folderByKey, FOLDER_OBJECT_SQL, isFolderKey } from "./folders";
import type { S3Object } from "./object";
import { validObjectKey } from "./request";

export type { S3Object } from "./object";

const OBJECT_SQL = `
  SELECT i.id, i.blob_id, i.object_key, i.created_at, i.s3_meta, b.mime, b.size, b.md5, b.storage_key
  FROM images i JOIN blobs b ON b.id = i.blob_id`;

/** Expired images are gone for S3 clients even before the sweeper removes them. */
const LIVE = "(i.expire_at IS NULL OR i.expire_at > ?)";

/** The image keyed `key`, or the folder marker when `key` ends in `/`. */
export function objectByKey(app: AppContext, userId: string, key: string): S3Object | undefined {
  if (isFolderKey(key)) return folderByKey(app, userId, key);
  if (!validObjectKey(key)) return undefined;
  return (
    app.db
      .query<S3Object, [string, string, string]>(`${OBJECT_SQL} WHERE i.user_id = ? AND i.object_key = ? AND ${LIVE}`)
      .get(userId, key, sqlTime()) ?? undefined
  );
}

/** Keys strictly after `after`, from `from` on, in S3 (byte) order; SQLite's BINARY collation is UTF-8 byte order. */
export function objectsAfter(app: AppContext, userId: string, after: string, from: string, limit: number): S3Object[] {
  return app.db
    .query<S3Object, [string, string, string, string, string, string, string, number]>(
      `SELECT * FROM (
         ${OBJECT_SQL} WHERE i.user_id = ? AND i.object_key IS NOT NULL AND i.object_key > ? AND i.object_key >= ? AND ${LIVE}
         UNION ALL
         ${FOLDER_OBJECT_SQL} WHERE f.user_id = ? AND f.object_key > ? AND f.object_key >= ?
       ) ORDER BY object_key LIMIT ?`,
    )
    .all(userId, after, from, sqlTime(), userId, after, from, limit);
}

export function hasObjects(app: AppContext, userId: string): boolean {
  return (
    !!app.db.query("SELECT 1 FROM images WHERE user_id = ? AND object_key IS NOT NULL LIMIT 1").get(userId) ||
    !!app.db.query("SELECT 1 FROM s3_folder_markers WHERE user_id = ? LIMIT 1").get(userId)
  );
}

export function setObjectMeta(app: AppContext, imageId: string, meta: Record<string, string>) {
  app.db.query("UPDATE images SET s3_meta = ? WHERE id = ?").run(JSON.stringify(meta), imageId);
}

export function parseMeta(json: string): Record<string, string> {
  if (!json) return {};
  try {
    const parsed = JSON.parse(json) as unknown;
    return parsed && typeof parsed === "object" ? (parsed as Record<string, string>) : {};
  } catch {
    return {};
  }
}

/** Records a blob's MD5 the first time it is known (all references share the bytes). */
export function rememberMd5(app: AppContext, blobId: number, md5: string) {
  app.db.query("UPDATE blobs SET md5 = ? WHERE id = ? AND md5 = ''").run(md5, blobId);
}

/** The blob's MD5 hex; blobs stored before S3 support are hashed once from their bytes and remembered. */
export async function md5Of(app: AppContext, object: S3Object): Promise<string> {
  if (object.md5) return object.md5;
  const { stream } = await openBlob(app, { id: object.blob_id, storage_key: object.storage_key });
  const hash = createHash("md5");
  for await (const chunk of stream) hash.update(chunk);
  const md5 = hash.digest("hex");
  rememberMd5(app, object.blob_id, md5);
  object.md5 = md5;
  return md5;
}
