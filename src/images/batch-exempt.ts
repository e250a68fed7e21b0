import type { AppContext } from "../context";
import { Slicer } from "../db/sliced";

export interface BatchExemptResult {
  /** Images that are now in the state asked for (those already in it included). */
  updated: number;
  failed: { id: string; error: string }[];
}

/**
 * Sets or clears the cleanup exemption of each of `ids`, as `PATCH /api/admin/images/{id}` does
 * for one: an exempt image leaves the cleanup list at once and the sweep never flags it; a cleared
 * one is judged again by the next sweep. The console's "keep" of a selection sends one request per
 * 100 images instead of one per image. Each id is its own small statement (the row moves between
 * two partial indexes, ~0.1 ms at a million images), with a turn of the loop whenever they have run
 * for a slice. Unknown ids are reported, the rest still change. `changed(id)` runs after each change
 * (the audit row and the delivery caches).
 */
export async function setExemptInSlices(app: AppContext, ids: string[], exempt: boolean, changed: (id: string) => void): Promise<BatchExemptResult> {
  let updated = 0;
  const failed: BatchExemptResult["failed"] = [];
  const slicer = new Slicer();
  for (const id of new Set(ids)) {
    await slicer.step();
    const image = app.images.view(id);
    if (!image) {
      failed.push({ id, error: "图片不存在" });
      continue;
    }
    updated++;
    if (Boolean(image.cleanup_exempt) === exempt) continue;
    app.images.setCleanupExempt(id, exempt);
    changed(id);
  }
  return { updated, failed };
}
