/** SQL of the S3 surface: folder markers (s3_folder_markers) and the objects' listing columns. */
import type { Database } from "bun:sqlite";
import { sqlTime } from "../db/time";
import type { S3Object } from "./object";

/** MD5 of zero bytes: the ETag of every folder marker. */
export const EMPTY_MD5 = "d41d8cd98f00b204e9800998ecf8427e";
export const FOLDER_MIME = "application/x-directory";

/** Columns shaped like object-repo's OBJECT_SQL, so listings can merge both kinds. */
export const FOLDER_OBJECT_SQL = `
  SELECT '' AS id, 0 AS blob_id, f.object_key, f.created_at, '' AS s3_meta, '${FOLDER_MIME}' AS mime, 0 AS size,
         '${EMPTY_MD5}' AS md5, '' AS storage_key
  FROM s3_folder_markers f`;

export function selectFolder(db: Database, userId: string, key: string): S3Object | undefined {
  return db.query<S3Object, [string, string]>(`${FOLDER_OBJECT_SQL} WHERE f.user_id = ? AND f.object_key = ?`).get(userId, key) ?? undefined;
}

export function upsertFolder(db: Database, userId: string, key: string) {
  db.query("INSERT OR REPLACE INTO s3_folder_markers (user_id, object_key, created_at) VALUES (?, ?, ?)").run(userId, key, sqlTime());
}

export function deleteFolderRow(db: Database, userId: string, key: string): boolean {
  return db.query("DELETE FROM s3_folder_markers WHERE user_id = ? AND object_key = ?").run(userId, key).changes > 0;
}
