import type { AppContext } from "../context";
import { readMeta, writeMeta } from "../db/meta";
import { sqlTime } from "../db/time";
import { enqueueCdnPurge } from "../ops/cdn-purge";
import { BLOB_DELETE_JOB } from "./jobs";
import { blobDeleteKey, deleteStartedAt, pendingDeleteBlobIds, retimeBlobDelete } from "./repos/delete-retime";
import { blobIdOfImage, markBlobPendingDelete, removeImageReference } from "./repos/references";
import { inWriteTransaction } from "../db/write-transaction";

/**
 * Deletes one image reference at once; when the blob's count drops to zero its physical
 * delete is scheduled after `delete_grace_minutes`. Returns false when the image is absent.
 */
export function deleteReference(app: AppContext, imageId: string): boolean {
  const deleted = inWriteTransaction(app.db, () => {
    const blobId = blobIdOfImage(app.db, imageId);
    if (blobId === undefined) return undefined;
    // The purge fires now, not after the grace period (spec 4.13); it reads the variants first.
    enqueueCdnPurge(app, imageId, blobId);
    removeImageReference(app.db, imageId, blobId);
    const blob = app.images.blob(blobId)!;
    if (blob.ref_count <= 0) scheduleBlobDelete(app, blob.id);
    return blobId;
  });
  if (deleted === undefined) return false;
  app.lookups.forget(imageId);
  return true;
}

/**
 * Marks an unreferenced blob for physical deletion after `delete_grace_minutes` and queues the
 * job, inside the caller's transaction (a re-upload in the meantime revives the blob).
 */
export function scheduleBlobDelete(app: AppContext, blobId: number) {
  const runAt = Date.now() + app.settings.get().delete_grace_minutes * 60_000;
  markBlobPendingDelete(app.db, blobId, sqlTime(runAt));
  app.jobs.enqueue(BLOB_DELETE_JOB, { blob_id: blobId }, { runAt, uniqueKey: blobDeleteKey(blobId, runAt) });
}

/** `meta` row: the grace every pending delete is timed with (a re-timing cut short by a stop runs again at start). */
const GRACE_APPLIED_KEY = "delete_grace_applied_minutes";
/** Pending deletes re-timed per transaction before yielding: a mass delete of a large library never stalls requests. */
const RETIME_BATCH = 500;

/**
 * Re-times every pending physical delete to (when its last reference went) + the current
 * `delete_grace_minutes`, in both directions: a lowered grace frees the disk sooner (a delete
 * now due runs at once), a raised one lengthens the undo window of every delete not yet carried
 * out. Absolute, so running it twice, or concurrently with new deletes, gives the same times.
 * Walks the partial index of pending blobs RETIME_BATCH at a time with a yield in between.
 */
export async function retimePendingDeletes(app: AppContext): Promise<{ retimed: number; due: number }> {
  const grace = app.settings.get().delete_grace_minutes;
  let after = 0;
  let retimed = 0;
  let due = 0;
  for (;;) {
    const ids = pendingDeleteBlobIds(app.db, after, RETIME_BATCH);
    if (!ids.length) break;
    const now = Date.now();
    inWriteTransaction(app.db, () => {
      for (const id of ids) {
        const started = deleteStartedAt(app.db, id);
        if (started === undefined) continue;
        const runAt = started + grace * 60_000;
        retimeBlobDelete(app.db, id, sqlTime(runAt), runAt, now);
        retimed++;
        if (runAt <= now) due++;
      }
    });
    after = ids.at(-1)!;
    if (ids.length < RETIME_BATCH) break;
    await Bun.sleep(0);
  }
  if (app.settings.get().delete_grace_minutes === grace) writeMeta(app.db, GRACE_APPLIED_KEY, String(grace));
  if (due) app.jobs.wake();
  if (retimed) app.log.info("已按新的删除宽限期重新安排待删除的图片", { grace_minutes: grace, blobs: retimed, due_now: due });
  return { retimed, due };
}

/**
 * Keeps pending deletes timed with the current grace: after each change of
 * `delete_grace_minutes`, and at start when a re-timing did not finish. One run at a time; a
 * change during a run starts another after it.
 */
export function watchDeleteGrace(app: AppContext): void {
  let running: Promise<void> | undefined;
  let again = false;
  const kick = () => {
    if (running) {
      again = true;
      return;
    }
    running = (async () => {
      do {
        again = false;
        await retimePendingDeletes(app);
      } while (again);
    })()
      .catch((err) => app.log.error("按新的删除宽限期重新安排失败", { err: (err as Error).message }))
      .finally(() => {
        running = undefined;
      });
  };
  const applied = readMeta(app.db, GRACE_APPLIED_KEY);
  const grace = app.settings.get().delete_grace_minutes;
  // Before this version every delete kept its time: nothing to catch up with on the first start.
  if (applied === undefined) writeMeta(app.db, GRACE_APPLIED_KEY, String(grace));
  else if (Number(applied) !== grace) kick();
  app.settings.onChange((changed) => {
    if (changed.includes("delete_grace_minutes")) kick();
  });
}
