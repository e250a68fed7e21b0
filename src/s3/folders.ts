/**
 * Folder markers: zero-byte objects whose key ends in `/` ("new folder" in GUI clients such as
 * Cyberduck or S3 Browser). They are listed and answer HEAD/GET with an empty body, but they are not
 * images: no blob, no /o/ alias, nothing counted in usage.
 */
import type { AppContext } from "../context";
import type { S3Object } from "./object";
import { deleteFolderRow, selectFolder, upsertFolder } from "./repo";
import { validObjectKey } from "./request";

export { EMPTY_MD5, FOLDER_MIME } from "./repo";

/** `a/b/` is a folder key when `a/b` is a valid object key. */
export function isFolderKey(key: string): boolean {
  return key.endsWith("/") && validObjectKey(key.slice(0, -1));
}

export function isFolderObject(object: S3Object): boolean {
  return object.blob_id === 0;
}

export function folderByKey(app: AppContext, userId: string, key: string): S3Object | undefined {
  return selectFolder(app.db, userId, key);
}

export function putFolder(app: AppContext, userId: string, key: string) {
  upsertFolder(app.db, userId, key);
}

export function deleteFolder(app: AppContext, userId: string, key: string): boolean {
  return deleteFolderRow(app.db, userId, key);
}
