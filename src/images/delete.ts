import type { AppContext } from "../context";
import { sqlTime } from "../db/time";
import { BLOB_DELETE_JOB } from "./jobs";

/**
 * Deletes one image reference at once; when the blob's count drops to zero its physical
 * delete is scheduled after `delete_grace_minutes`. Returns false when the image is absent.
 */
export function deleteReference(app: AppContext, imageId: string): boolean {
  const deleted = app.db.transaction(() => {
    const image = app.db.query<{ blob_id: number }, [string]>("SELECT blob_id FROM images WHERE id = ?").get(imageId);
    if (!image) return undefined;
    app.db.query("DELETE FROM images WHERE id = ?").run(imageId);
    app.db.query("UPDATE blobs SET ref_count = ref_count - 1 WHERE id = ?").run(image.blob_id);
    const blob = app.images.blob(image.blob_id)!;
    if (blob.ref_count <= 0) {
      const graceMs = app.settings.get().delete_grace_minutes * 60_000;
      const runAt = Date.now() + graceMs;
      app.db.query("UPDATE blobs SET ref_count = 0, pending_delete = 1, delete_after = ? WHERE id = ?").run(sqlTime(runAt), blob.id);
      app.jobs.enqueue(BLOB_DELETE_JOB, { blob_id: blob.id }, { runAt, uniqueKey: `blob-delete:${blob.id}:${runAt}` });
    }
    return image.blob_id;
  })();
  if (deleted === undefined) return false;
  app.lookups.forget(imageId);
  return true;
}
