/**
 * Open S3 multipart uploads: their rows (who, which key, staged bytes), their part files under
 * <tmp>/multipart/<uploadId>/, the per-user limits that keep them from exhausting disk or quota,
 * and the expiry of abandoned ones (run by the cleanup sweep).
 */
import { rm } from "node:fs/promises";
import { join } from "node:path";
import type { AppContext } from "../context";
import { sqlTime } from "../db/time";
import { S3Error } from "./errors";
import {
  changeStagedBytes,
  countUploads,
  deleteUploadRow,
  insertUploadRow,
  selectUpload,
  selectUploadsAfter,
  sumStagedBytes,
  type UploadRow,
  uploadIdsStartedBefore,
} from "./repo";

export type { UploadRow };

/** Open (neither completed nor aborted) uploads one user may have at once. */
export const MAX_OPEN_UPLOADS_PER_USER = 20;

export const partsDir = (app: AppContext, uploadId: string) => join(app.paths.tmp, "multipart", uploadId);

export function findUploadRow(app: AppContext, userId: string, uploadId: string): UploadRow | undefined {
  if (!/^[0-9a-f]{32}$/.test(uploadId)) return undefined;
  return selectUpload(app.db, userId, uploadId);
}

export function openUploadCount(app: AppContext, userId: string): number {
  return countUploads(app.db, userId);
}

/** Bytes of every stored part of the user's open uploads. */
export function stagedBytes(app: AppContext, userId: string): number {
  return sumStagedBytes(app.db, userId);
}

export function addStagedBytes(app: AppContext, uploadId: string, delta: number) {
  changeStagedBytes(app.db, uploadId, delta);
}

/** Bytes of parts being received right now, per user: counted with the staged bytes so concurrent parts cannot overshoot together. */
const receiving = new Map<string, number>();

export function receivingBytes(userId: string): number {
  return receiving.get(userId) ?? 0;
}

export function trackReceiving(userId: string, delta: number) {
  const next = (receiving.get(userId) ?? 0) + delta;
  if (next <= 0) receiving.delete(userId);
  else receiving.set(userId, next);
}

/**
 * Room left under the user's quota for staged parts (Infinity without a quota). `used` (bytes of the
 * user's images) may be passed in when it was just read, so a per-chunk check stays cheap.
 */
export function quotaRoom(app: AppContext, userId: string, used?: number): number {
  const quota = app.users.byId(userId)?.quota_bytes;
  if (quota === null || quota === undefined) return Infinity;
  return quota - (used ?? app.images.usedBytes(userId)) - stagedBytes(app, userId) - receivingBytes(userId);
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

/** Removes the row and the part files (Complete, Abort, expiry). */
export async function removeUpload(app: AppContext, uploadId: string) {
  deleteUploadRow(app.db, uploadId);
  await rm(partsDir(app, uploadId), { recursive: true, force: true });
}

/** The user's uploads in S3 order (key, then upload id), after the markers, up to `limit`. */
export function uploadsAfter(app: AppContext, userId: string, prefix: string, keyMarker: string, uploadIdMarker: string, limit: number): UploadRow[] {
  return selectUploadsAfter(app.db, userId, prefix, keyMarker, uploadIdMarker, limit);
}

/** Cleanup sweep: uploads older than `s3_multipart_expiry_hours` are aborted. */
export async function expireMultipartUploads(app: AppContext, now = Date.now()): Promise<number> {
  const cutoff = sqlTime(now - app.settings.get().s3_multipart_expiry_hours * 3_600_000);
  const rows = uploadIdsStartedBefore(app.db, cutoff);
  for (const uploadId of rows) await removeUpload(app, uploadId);
  if (rows.length) app.log.info("已清除过期的 S3 分片上传", { count: rows.length });
  return rows.length;
}
