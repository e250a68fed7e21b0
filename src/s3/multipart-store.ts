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

/** Open (neither completed nor aborted) uploads one user may have at once. */
export const MAX_OPEN_UPLOADS_PER_USER = 20;

export interface UploadRow {
  upload_id: string;
  user_id: string;
  token_id: number | null;
  object_key: string;
  meta: string;
  created_at: string;
  staged_bytes: number;
}

export const partsDir = (app: AppContext, uploadId: string) => join(app.paths.tmp, "multipart", uploadId);

export function findUploadRow(app: AppContext, userId: string, uploadId: string): UploadRow | undefined {
  if (!/^[0-9a-f]{32}$/.test(uploadId)) return undefined;
  return app.db.query<UploadRow, [string, string]>("SELECT * FROM multipart_uploads WHERE upload_id = ? AND user_id = ?").get(uploadId, userId) ?? undefined;
}

export function openUploadCount(app: AppContext, userId: string): number {
  return app.db.query<{ n: number }, [string]>("SELECT COUNT(*) AS n FROM multipart_uploads WHERE user_id = ?").get(userId)!.n;
}

/** Bytes of every stored part of the user's open uploads. */
export function stagedBytes(app: AppContext, userId: string): number {
  return app.db.query<{ n: number }, [string]>("SELECT COALESCE(SUM(staged_bytes), 0) AS n FROM multipart_uploads WHERE user_id = ?").get(userId)!.n;
}

export function addStagedBytes(app: AppContext, uploadId: string, delta: number) {
  app.db.query("UPDATE multipart_uploads SET staged_bytes = MAX(0, staged_bytes + ?) WHERE upload_id = ?").run(delta, uploadId);
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
    throw new S3Error(
      "InvalidRequest",
      `未完成的分片上传过多（每个用户最多 ${MAX_OPEN_UPLOADS_PER_USER} 个），请先完成或取消已有的上传（如 rclone cleanup）`,
    );
  }
  if (quotaRoom(app, userId) <= 0) throw quotaExceeded();
}

export function insertUpload(app: AppContext, row: Omit<UploadRow, "created_at" | "staged_bytes">) {
  app.db
    .query("INSERT INTO multipart_uploads (upload_id, user_id, token_id, object_key, meta, created_at) VALUES (?, ?, ?, ?, ?, ?)")
    .run(row.upload_id, row.user_id, row.token_id, row.object_key, row.meta, sqlTime());
}

/** Removes the row and the part files (Complete, Abort, expiry). */
export async function removeUpload(app: AppContext, uploadId: string) {
  app.db.query("DELETE FROM multipart_uploads WHERE upload_id = ?").run(uploadId);
  await rm(partsDir(app, uploadId), { recursive: true, force: true });
}

/** The user's uploads in S3 order (key, then upload id), after the markers, up to `limit`. */
export function uploadsAfter(app: AppContext, userId: string, prefix: string, keyMarker: string, uploadIdMarker: string, limit: number): UploadRow[] {
  return app.db
    .query<UploadRow, [string, string, string, string, string, string, number]>(
      `SELECT * FROM multipart_uploads
       WHERE user_id = ? AND substr(object_key, 1, length(?)) = ? AND (object_key > ? OR (object_key = ? AND upload_id > ?))
       ORDER BY object_key, upload_id LIMIT ?`,
    )
    .all(userId, prefix, prefix, keyMarker, keyMarker, uploadIdMarker, limit);
}

/** Cleanup sweep: uploads older than `s3_multipart_expiry_hours` are aborted. */
export async function expireMultipartUploads(app: AppContext, now = Date.now()): Promise<number> {
  const cutoff = sqlTime(now - app.settings.get().s3_multipart_expiry_hours * 3_600_000);
  const rows = app.db.query<{ upload_id: string }, [string]>("SELECT upload_id FROM multipart_uploads WHERE created_at < ? LIMIT 500").all(cutoff);
  for (const { upload_id } of rows) await removeUpload(app, upload_id);
  if (rows.length) app.log.info("已清除过期的 S3 分片上传", { count: rows.length });
  return rows.length;
}
