/**
 * The bytes of a user's open S3 multipart uploads that count against the quota from the first byte:
 * staged parts, and parts being received right now. The quota check of every write (images/store.ts:
 * PutObject, CopyObject, POST Object, /api/upload, Lsky, Chevereto) adds them to the user's images
 * (registered by router.ts), so a full quota cannot be passed by staging parts first and then writing
 * something else.
 */
import type { AppContext } from "../context";
import { selectStagedBytes } from "./repo";

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
 * Staged and arriving multipart bytes of the user. `leaveOut` is the upload a Complete is storing,
 * for that Complete's own check only: its parts are becoming the object, which the check counts as
 * the new image's size (counted twice, an upload that fits could never complete), while every other
 * write of the user still counts them until the upload is gone.
 */
export function multipartBytes(app: AppContext, userId: string, leaveOut?: string): number {
  let staged = 0;
  for (const row of selectStagedBytes(app.db, userId)) if (row.upload_id !== leaveOut) staged += row.staged_bytes;
  return staged + receivingBytes(userId);
}
