// The image grid's batch actions on a selection: delete, and set or clear the cleanup exemption
// (admins; the same as the review tab's "豁免所选"). Worked through in requests of at most 100 ids,
// the API's limit, so a selection spanning many pages goes through; every failure is reported.
import { api } from "./api";
import { toast } from "./dom";

/** Ids per request: the limit of batch-delete and batch-exempt. */
const BATCH = 100;

interface BatchAnswer {
  deleted?: number;
  updated?: number;
  failed: { id: string; error: string }[];
}

async function inBatches(path: string, ids: string[], extra: Record<string, unknown>): Promise<{ done: number; failed: string[] }> {
  let done = 0;
  const failed: string[] = [];
  for (let i = 0; i < ids.length; i += BATCH) {
    const res = await api<BatchAnswer>("POST", path, { ids: ids.slice(i, i + BATCH), ...extra });
    done += res.deleted ?? res.updated ?? 0;
    failed.push(...res.failed.map((f) => f.error));
  }
  return { done, failed };
}

/** "已删除 3 张，2 张失败：图片不存在": the first error stands for the rest. */
function report(verb: string, o: { done: number; failed: string[] }): void {
  if (o.failed.length) toast(`${verb} ${o.done} 张，${o.failed.length} 张失败：${o.failed[0]}`, "error");
  else toast(`${verb} ${o.done} 张`);
}

export async function deleteImages(ids: string[]): Promise<void> {
  report("已删除", await inBatches("/api/admin/images/batch-delete", ids, {}));
}

/** `exempt` true keeps the images out of the cleanup list; false lets the next sweep judge them again. */
export async function setCleanupExempt(ids: string[], exempt: boolean): Promise<void> {
  report(exempt ? "已豁免清理" : "已取消豁免", await inBatches("/api/admin/images/batch-exempt", ids, { exempt }));
}
