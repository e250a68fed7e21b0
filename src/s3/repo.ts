/** SQL of the S3 surface: folder markers (s3_folder_markers), the objects' listing columns, open multipart uploads. */
import type { Database } from "bun:sqlite";
import { sqlTime } from "../db/time";
import type { S3Object } from "./object";

/** MD5 of zero bytes: the ETag of every folder marker. */
export const EMPTY_MD5 = "d41d8cd98f00b204e9800998ecf8427e";
export const FOLDER_MIME = "application/x-directory";

/** Columns shaped like OBJECT_SQL, so listings can merge both kinds. */
export const FOLDER_OBJECT_SQL = `
  SELECT '' AS id, 0 AS blob_id, f.object_key, f.created_at, '' AS s3_meta, '${FOLDER_MIME}' AS mime, 0 AS size,
         '${EMPTY_MD5}' AS md5, '' AS storage_key, '' AS sha256
  FROM s3_folder_markers f`;

/** Every image with an object_key is an object; its columns with the blob's. */
const OBJECT_SQL = `
  SELECT i.id, i.blob_id, i.object_key, i.created_at, i.s3_meta, b.mime, b.size, b.md5, b.storage_key, b.sha256
  FROM images i JOIN blobs b ON b.id = i.blob_id`;

/** Expired images are gone for S3 clients even before the sweeper removes them. */
const LIVE = "(i.expire_at IS NULL OR i.expire_at > ?)";

/** The live image keyed `key` for this user. */
export function selectObject(db: Database, userId: string, key: string): S3Object | undefined {
  return (
    db.query<S3Object, [string, string, string]>(`${OBJECT_SQL} WHERE i.user_id = ? AND i.object_key = ? AND ${LIVE}`).get(userId, key, sqlTime()) ?? undefined
  );
}

/**
 * Objects and folder markers with keys from `from` on (inclusive), in S3 (byte) order; SQLite's BINARY
 * collation is UTF-8 byte order. One lower bound, because with two (`> ? AND >= ?`) SQLite seeks on one
 * and filters on the other. Each table is read in index order up to `limit` before the merge, because a
 * sort over the whole UNION would read every key after `from` on each page.
 */
export function selectObjectsFrom(db: Database, userId: string, from: string, limit: number): S3Object[] {
  return db
    .query<S3Object, [string, string, string, number, string, string, number, number]>(
      `SELECT * FROM (
         SELECT * FROM (${OBJECT_SQL} WHERE i.user_id = ? AND i.object_key IS NOT NULL AND i.object_key >= ? AND ${LIVE} ORDER BY i.object_key LIMIT ?)
         UNION ALL
         SELECT * FROM (${FOLDER_OBJECT_SQL} WHERE f.user_id = ? AND f.object_key >= ? ORDER BY f.object_key LIMIT ?)
       ) ORDER BY object_key LIMIT ?`,
    )
    .all(userId, from, sqlTime(), limit, userId, from, limit, limit);
}

/** Whether the user has any object or folder marker (a bucket that is not empty). */
export function userHasObjects(db: Database, userId: string): boolean {
  return (
    !!db.query("SELECT 1 FROM images WHERE user_id = ? AND object_key IS NOT NULL LIMIT 1").get(userId) ||
    !!db.query("SELECT 1 FROM s3_folder_markers WHERE user_id = ? LIMIT 1").get(userId)
  );
}

/** Stores the x-amz-meta-* headers of an object, as JSON. */
export function updateObjectMeta(db: Database, imageId: string, metaJson: string) {
  db.query("UPDATE images SET s3_meta = ? WHERE id = ?").run(metaJson, imageId);
}

export function selectFolder(db: Database, userId: string, key: string): S3Object | undefined {
  return db.query<S3Object, [string, string]>(`${FOLDER_OBJECT_SQL} WHERE f.user_id = ? AND f.object_key = ?`).get(userId, key) ?? undefined;
}

export function upsertFolder(db: Database, userId: string, key: string) {
  db.query("INSERT OR REPLACE INTO s3_folder_markers (user_id, object_key, created_at) VALUES (?, ?, ?)").run(userId, key, sqlTime());
}

export function deleteFolderRow(db: Database, userId: string, key: string): boolean {
  return db.query("DELETE FROM s3_folder_markers WHERE user_id = ? AND object_key = ?").run(userId, key).changes > 0;
}

/** One open multipart upload (neither completed nor aborted). */
export interface UploadRow {
  upload_id: string;
  user_id: string;
  token_id: number | null;
  object_key: string;
  meta: string;
  created_at: string;
  staged_bytes: number;
}

export function selectUpload(db: Database, userId: string, uploadId: string): UploadRow | undefined {
  return db.query<UploadRow, [string, string]>("SELECT * FROM multipart_uploads WHERE upload_id = ? AND user_id = ?").get(uploadId, userId) ?? undefined;
}

export function countUploads(db: Database, userId: string): number {
  return db.query<{ n: number }, [string]>("SELECT COUNT(*) AS n FROM multipart_uploads WHERE user_id = ?").get(userId)!.n;
}

/** Staged bytes of each of the user's open uploads (at most MAX_OPEN_UPLOADS_PER_USER rows). */
export function selectStagedBytes(db: Database, userId: string): { upload_id: string; staged_bytes: number }[] {
  return db.query<{ upload_id: string; staged_bytes: number }, [string]>("SELECT upload_id, staged_bytes FROM multipart_uploads WHERE user_id = ?").all(userId);
}

/** Adds `delta` (negative for a replaced part) to the staged bytes, never below zero. */
export function changeStagedBytes(db: Database, uploadId: string, delta: number) {
  db.query("UPDATE multipart_uploads SET staged_bytes = MAX(0, staged_bytes + ?) WHERE upload_id = ?").run(delta, uploadId);
}

export function insertUploadRow(db: Database, row: Omit<UploadRow, "created_at" | "staged_bytes">, createdAt: string) {
  db.query("INSERT INTO multipart_uploads (upload_id, user_id, token_id, object_key, meta, created_at) VALUES (?, ?, ?, ?, ?, ?)").run(
    row.upload_id,
    row.user_id,
    row.token_id,
    row.object_key,
    row.meta,
    createdAt,
  );
}

export function deleteUploadRow(db: Database, uploadId: string) {
  db.query("DELETE FROM multipart_uploads WHERE upload_id = ?").run(uploadId);
}

/** The user's uploads in S3 order (key, then upload id), after the markers, up to `limit`. */
export function selectUploadsAfter(db: Database, userId: string, prefix: string, keyMarker: string, uploadIdMarker: string, limit: number): UploadRow[] {
  return db
    .query<UploadRow, [string, string, string, string, string, string, number]>(
      `SELECT * FROM multipart_uploads
       WHERE user_id = ? AND substr(object_key, 1, length(?)) = ? AND (object_key > ? OR (object_key = ? AND upload_id > ?))
       ORDER BY object_key, upload_id LIMIT ?`,
    )
    .all(userId, prefix, prefix, keyMarker, keyMarker, uploadIdMarker, limit);
}

/** Up to 500 uploads started before `cutoff` (SQL time). */
export function uploadIdsStartedBefore(db: Database, cutoff: string): string[] {
  return db
    .query<{ upload_id: string }, [string]>("SELECT upload_id FROM multipart_uploads WHERE created_at < ? LIMIT 500")
    .all(cutoff)
    .map((r) => r.upload_id);
}

/** Every open upload with its counted bytes (at start, to match them with the part files). */
export function allUploadStaging(db: Database): { upload_id: string; staged_bytes: number }[] {
  return db.query<{ upload_id: string; staged_bytes: number }, []>("SELECT upload_id, staged_bytes FROM multipart_uploads").all();
}

export function setStagedBytes(db: Database, uploadId: string, bytes: number) {
  db.query("UPDATE multipart_uploads SET staged_bytes = ? WHERE upload_id = ?").run(bytes, uploadId);
}
