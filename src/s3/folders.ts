/**
 * Folder markers: zero-byte objects whose key ends in `/` ("new folder" in GUI clients such as
 * Cyberduck or S3 Browser). They are listed and answer HEAD/GET with an empty body, but they are not
 * images: no blob, no /o/ alias, nothing counted in usage.
 */
import type { AppContext } from "../context";
import { sqlTime } from "../db/time";
import type { S3Object } from "./object";
import { validObjectKey } from "./request";

export const EMPTY_MD5 = "d41d8cd98f00b204e9800998ecf8427e";
export const FOLDER_MIME = "application/x-directory";

/** `a/b/` is a folder key when `a/b` is a valid object key. */
export function isFolderKey(key: string): boolean {
  return key.endsWith("/") && validObjectKey(key.slice(0, -1));
}

/** Columns shaped like object-repo's OBJECT_SQL, so listings can merge both kinds. */
export const FOLDER_OBJECT_SQL = `
  SELECT '' AS id, 0 AS blob_id, f.object_key, f.created_at, '' AS s3_meta, '${FOLDER_MIME}' AS mime, 0 AS size,
         '${EMPTY_MD5}' AS md5, '' AS storage_key
  FROM s3_folder_markers f`;

export function isFolderObject(object: S3Object): boolean {
  return object.blob_id === 0;
}

export function folderByKey(app: AppContext, userId: string, key: string): S3Object | undefined {
  return app.db.query<S3Object, [string, string]>(`${FOLDER_OBJECT_SQL} WHERE f.user_id = ? AND f.object_key = ?`).get(userId, key) ?? undefined;
}

export function putFolder(app: AppContext, userId: string, key: string) {
  app.db.query("INSERT OR REPLACE INTO s3_folder_markers (user_id, object_key, created_at) VALUES (?, ?, ?)").run(userId, key, sqlTime());
}

export function deleteFolder(app: AppContext, userId: string, key: string): boolean {
  return app.db.query("DELETE FROM s3_folder_markers WHERE user_id = ? AND object_key = ?").run(userId, key).changes > 0;
}
