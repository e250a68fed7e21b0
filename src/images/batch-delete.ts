import type { AppContext } from "../context";
import { SLICE_MS, Slicer } from "../db/sliced";
import { deleteReference } from "./delete";

export interface BatchDeleteResult {
  deleted: number;
  failed: { id: string; error: string }[];
}

/**
 * Deletes each of `ids` the caller may see (`visible`), each in its own transaction, and reports
 * the ones that could not go. Each id stands alone: one that cannot be deleted (its transaction
 * rolled back) is reported and the rest still go, instead of a 500 after some were already
 * deleted. A delete costs ~0.5-1 ms at a million images (the reference, the rollups, the search
 * index, the purge and delete jobs), so the loop is yielded whenever the deletes since the last
 * yield have run for `sliceMs`: a batch of 100 never holds delivery for its whole length.
 * `done(id)` runs right after each delete (the audit row).
 */
export async function deleteImagesInSlices(
  app: AppContext,
  ids: string[],
  visible: (id: string) => boolean,
  done: (id: string) => void,
  sliceMs = SLICE_MS,
): Promise<BatchDeleteResult> {
  let deleted = 0;
  const failed: BatchDeleteResult["failed"] = [];
  const slicer = new Slicer(sliceMs);
  // An id named twice is one image: its second mention was reported failed ("图片不存在") although
  // this very request had deleted it.
  for (const id of new Set(ids)) {
    await slicer.step();
    try {
      // Seen again after each yield: an image deleted meanwhile is reported, not deleted twice.
      if (visible(id) && deleteReference(app, id)) {
        deleted++;
        done(id);
      } else failed.push({ id, error: "图片不存在" });
    } catch (err) {
      app.log.error("批量删除中的一张图片删除失败", { image: id, err: (err as Error).message });
      failed.push({ id, error: "删除失败，请稍后重试" });
    }
  }
  return { deleted, failed };
}
