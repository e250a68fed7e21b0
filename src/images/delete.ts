import type { AppContext } from "../context";
import { sqlTime } from "../db/time";
import { enqueueCdnPurge } from "../ops/cdn-purge";
import { BLOB_DELETE_JOB } from "./jobs";
import { blobIdOfImage, markBlobPendingDelete, removeImageReference } from "./repos/references";

/**
 * Deletes one image reference at once; when the blob's count drops to zero its physical
 * delete is scheduled after `delete_grace_minutes`. Returns false when the image is absent.
 */
export function deleteReference(app: AppContext, imageId: string): boolean {
  const deleted = app.db.transaction(() => {
    const blobId = blobIdOfImage(app.db, imageId);
    if (blobId === undefined) return undefined;
    // The purge fires now, not after the grace period (spec 4.13); it reads the variants first.
    enqueueCdnPurge(app, imageId, blobId);
    removeImageReference(app.db, imageId, blobId);
    const blob = app.images.blob(blobId)!;
    if (blob.ref_count <= 0) scheduleBlobDelete(app, blob.id);
    return blobId;
  })();
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
  app.jobs.enqueue(BLOB_DELETE_JOB, { blob_id: blobId }, { runAt, uniqueKey: `blob-delete:${blobId}:${runAt}` });
}
