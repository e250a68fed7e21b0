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

/** Uploads whose Complete is storing their parts as the object right now. */
const completing = new Set<string>();

/**
 * Runs a Complete's store with its upload's staged bytes left out: they are becoming the object, which
 * the commit's quota check counts as the new image's size; counted twice, an upload that fits the
 * quota could never complete. Once the row is removed there is nothing left to leave out.
 */
export async function whileCompleting<T>(upload: { upload_id: string }, fn: () => Promise<T>): Promise<T> {
  completing.add(upload.upload_id);
  try {
    return await fn();
  } finally {
    completing.delete(upload.upload_id);
  }
}

/** Staged (minus uploads being completed) and arriving multipart bytes of the user. */
export function multipartBytes(app: AppContext, userId: string): number {
  let staged = 0;
  for (const row of selectStagedBytes(app.db, userId)) if (!completing.has(row.upload_id)) staged += row.staged_bytes;
  return staged + receivingBytes(userId);
}
