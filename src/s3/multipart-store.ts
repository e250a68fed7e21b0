/**
 * Open S3 multipart uploads: their rows (who, which key, staged bytes), their part files under
 * <data_dir>/multipart/<uploadId>/ (kept across restarts: multipart-restart.ts), the per-upload lock
 * that orders the requests changing them, the per-user limits that keep them from exhausting disk or
 * quota, and the expiry of abandoned ones (run by the cleanup sweep).
 */
import { KeyedTurns } from "../shared/keyed-turns";
import { randomBytes } from "node:crypto";
import { readdir, rm } from "node:fs/promises";
import { join } from "node:path";
import type { AppContext } from "../context";
import { sqlTime } from "../db/time";
import { markAt } from "../testing/hold-points";
import { S3Error } from "./errors";
import { multipartBytes } from "./multipart-bytes";
import {
  changeStagedBytes,
  countUploads,
  deleteUploadRow,
  insertUploadRow,
  selectUpload,
  selectUploadsAfter,
  type UploadRow,
  uploadIdsStartedBefore,
} from "./repo";

export type { UploadRow };
export { receivingBytes, trackReceiving } from "./multipart-bytes";

/** Open (neither completed nor aborted) uploads one user may have at once. */
export const MAX_OPEN_UPLOADS_PER_USER = 20;

export const partsDir = (app: AppContext, uploadId: string) => join(app.paths.multipart, uploadId);

/** A stored part's file name: its number and its MD5 (the part's ETag). */
export const PART_FILE = /^(\d+)\.([0-9a-f]{32})$/;

/** Stored parts of an upload: part number → file and MD5. */
export async function storedParts(dir: string): Promise<Map<number, { path: string; md5: string }>> {
  const parts = new Map<number, { path: string; md5: string }>();
  const names = await readdir(dir).catch(() => [] as string[]);
  for (const name of names) {
    const m = PART_FILE.exec(name);
    if (m) parts.set(Number(m[1]), { path: join(dir, name), md5: m[2]! });
  }
  return parts;
}

/**
 * Where a part is received: beside the parts dir, not in it. Complete and Abort remove that dir, which
 * must not pull the file from under a body still arriving (that was an ENOENT and a 500); the part only
 * moves into the dir under the upload's lock, after checking that the upload still exists. On the
 * same file system as the parts dir, so that move is a rename; a start removes what a stop cut off.
 */
export const partialPath = (app: AppContext, uploadId: string, partNumber: number) =>
  join(app.paths.multipart, `${uploadId}.${partNumber}.${randomBytes(6).toString("hex")}.partial`);

const uploadLocks = new KeyedTurns();

/**
 * Runs `fn` when no other request of the same upload is inside its own `withUploadLock`, in arrival
 * order. Complete, Abort, the commit of a part and expiry all change the part files and the row
 * together, so each must see them as another left them, never half-removed. The main thread is the
 * only writer, so an in-process queue is enough. Callers read the client's body before they queue,
 * so a waiter waits only for the server-side work of those ahead of it (a slow client holds no one
 * up); the last one out removes the entry, so the map never outgrows the requests in progress.
 */
export function withUploadLock<T>(uploadId: string, op: string, fn: () => Promise<T>): Promise<T> {
  return uploadLocks.run(uploadId, fn, () => markAt("s3.multipart-queued", `op=${op} upload=${uploadId}`));
}

export function findUploadRow(app: AppContext, userId: string, uploadId: string): UploadRow | undefined {
  if (!/^[0-9a-f]{32}$/.test(uploadId)) return undefined;
  return selectUpload(app.db, userId, uploadId);
}

export function openUploadCount(app: AppContext, userId: string): number {
  return countUploads(app.db, userId);
}

export function addStagedBytes(app: AppContext, uploadId: string, delta: number) {
  changeStagedBytes(app.db, uploadId, delta);
}

/**
 * Room left under the user's quota for staged parts (Infinity without a quota). `used` (bytes of the
 * user's images) may be passed in when it was just read, so a per-chunk check stays cheap.
 */
export function quotaRoom(app: AppContext, userId: string, used?: number): number {
  const quota = app.users.byId(userId)?.quota_bytes;
  if (quota === null || quota === undefined) return Infinity;
  return quota - (used ?? app.images.usedBytes(userId)) - multipartBytes(app, userId);
}

export const quotaExceeded = () => new S3Error("AccessDenied", "存储配额已满（含未完成的分片上传）");

/** Refuses a new upload when the user is at the open-upload limit or has no quota left. */
export function admitNewUpload(app: AppContext, userId: string) {
  if (openUploadCount(app, userId) >= MAX_OPEN_UPLOADS_PER_USER) {
    throw new S3Error("InvalidRequest", `未完成的分片上传过多（每个用户最多 ${MAX_OPEN_UPLOADS_PER_USER} 个），请先完成或取消已有的上传（如 rclone cleanup）`);
  }
  if (quotaRoom(app, userId) <= 0) throw quotaExceeded();
}

export function insertUpload(app: AppContext, row: Omit<UploadRow, "created_at" | "staged_bytes">) {
  insertUploadRow(app.db, row, sqlTime());
}

/** Removes the row and the part files (Complete, Abort, expiry; each under `withUploadLock`). */
export async function removeUpload(app: AppContext, uploadId: string) {
  deleteUploadRow(app.db, uploadId);
  await rm(partsDir(app, uploadId), { recursive: true, force: true });
}

/** Removes these uploads (rows and part files), each behind any request of it in progress (expiry, a deleted user's). */
export async function removeUploads(app: AppContext, uploadIds: string[], op = "remove") {
  for (const uploadId of uploadIds) await withUploadLock(uploadId, op, () => removeUpload(app, uploadId));
}

/** The user's uploads in S3 order (key, then upload id), after the markers, up to `limit`. */
export function uploadsAfter(app: AppContext, userId: string, prefix: string, keyMarker: string, uploadIdMarker: string, limit: number): UploadRow[] {
  return selectUploadsAfter(app.db, userId, prefix, keyMarker, uploadIdMarker, limit);
}

/** Cleanup sweep: uploads older than `s3_multipart_expiry_hours` are aborted. */
export async function expireMultipartUploads(app: AppContext, now = Date.now()): Promise<number> {
  const cutoff = sqlTime(now - app.settings.get().s3_multipart_expiry_hours * 3_600_000);
  const rows = uploadIdsStartedBefore(app.db, cutoff);
  // Behind any Complete in progress, which would otherwise lose its part files halfway.
  await removeUploads(app, rows, "expire");
  if (rows.length) app.log.info("已清除过期的 S3 分片上传", { count: rows.length });
  return rows.length;
}
