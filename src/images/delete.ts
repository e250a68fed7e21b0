import type { AppContext } from "../context";
import { sqlTime } from "../db/time";
import { enqueueCdnPurge } from "../ops/cdn-purge";
import { BLOB_DELETE_JOB } from "./jobs";

/**
 * Deletes one image reference at once; when the blob's count drops to zero its physical
 * delete is scheduled after `delete_grace_minutes`. Returns false when the image is absent.
 */
export function deleteReference(app: AppContext, imageId: string): boolean {
  const deleted = app.db.transaction(() => {
    const image = app.db.query<{ blob_id: number }, [string]>("SELECT blob_id FROM images WHERE id = ?").get(imageId);
    if (!image) return undefined;
    // The purge fires now, not after the grace period (spec 4.13); it reads the variants first.
    enqueueCdnPurge(app, imageId, image.blob_id);
    app.db.query("DELETE FROM images WHERE id = ?").run(imageId);
    app.db.query("UPDATE blobs SET ref_count = ref_count - 1 WHERE id = ?").run(image.blob_id);
    const blob = app.images.blob(image.blob_id)!;
    if (blob.ref_count <= 0) scheduleBlobDelete(app, blob.id);
    return image.blob_id;
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
  app.db.query("UPDATE blobs SET ref_count = 0, pending_delete = 1, delete_after = ? WHERE id = ?").run(sqlTime(runAt), blobId);
  app.jobs.enqueue(BLOB_DELETE_JOB, { blob_id: blobId }, { runAt, uniqueKey: `blob-delete:${blobId}:${runAt}` });
}
