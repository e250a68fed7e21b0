// Batch actions on a selection of images, shared by the image grid and the review tab's cleanup
// list: delete, and set or clear the cleanup exemption (admins). Worked through in requests of at
// most BATCH ids, the API's limit, so a selection spanning many pages goes through; every failure
// is reported.
import { api } from "./api";
import { toast } from "./dom";

/** Ids per request: the limit of batch-delete and batch-exempt. */
export const BATCH = 100;

/** What a run of batch requests did: how many, and each failure's reason. */
export interface Outcome {
  done: number;
  failed: string[];
}

/** "已删除 3 张，2 张失败：图片不存在" — the first error stands for the rest. */
export function reportBatch(verb: string, o: Outcome, stopped = false): void {
  const head = `${verb} ${o.done} 张${stopped ? "（已停止）" : ""}`;
  if (o.failed.length) toast(`${head}，${o.failed.length} 张失败：${o.failed[0]}`, "error");
  else toast(head);
}

/** One batch request (at most BATCH ids): the count it answers under `field` and each failure's reason go into `into`. */
const batchCall =
  (path: string, extra: Record<string, unknown>, field: "deleted" | "updated") =>
  async (ids: string[], into: Outcome): Promise<void> => {
    const res = await api<Record<typeof field, number> & { failed: { id: string; error: string }[] }>("POST", path, { ids, ...extra });
    into.done += res[field];
    into.failed.push(...res.failed.map((f) => f.error));
  };

export const deleteBatch = batchCall("/api/admin/images/batch-delete", {}, "deleted");
export const exemptBatch = (exempt: boolean) => batchCall("/api/admin/images/batch-exempt", { exempt }, "updated");

async function inBatches(ids: string[], act: (ids: string[], into: Outcome) => Promise<void>): Promise<Outcome> {
  const o: Outcome = { done: 0, failed: [] };
  for (let i = 0; i < ids.length; i += BATCH) await act(ids.slice(i, i + BATCH), o);
  return o;
}

export async function deleteImages(ids: string[]): Promise<void> {
  reportBatch("已删除", await inBatches(ids, deleteBatch));
}

/** `exempt` true keeps the images out of the cleanup list; false lets the next sweep judge them again. */
export async function setCleanupExempt(ids: string[], exempt: boolean): Promise<void> {
  reportBatch(exempt ? "已豁免清理" : "已取消豁免", await inBatches(ids, exemptBatch(exempt)));
}
