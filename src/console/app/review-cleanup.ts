// #review, the cleanup candidates (cold images, and images superseded by a later S3 upload to
// their key): paged by number at any depth (the server answers a deep page as fast as the
// first), selectable per row, per page or as the whole list, deleted or exempted in bounded
// batches with every failure reported.
import { api } from "./api";
import { BATCH, deleteBatch, exemptBatch, type Outcome, reportBatch } from "./image-batch";
import { errorText, fmtBytes, fmtTime, h, replace, toast } from "./dom";
import { thumbImage } from "./links";
import { reviewPager } from "./review-pager";
import type { CleanupItem, Page, ViewContext } from "./types";
import { dataTable, messageRow } from "./ui";

const PAGE_SIZE = 20;
const REASONS: Record<string, string> = { cold: "长期未访问", superseded: "已被覆盖" };

export function cleanupSection(ctx: ViewContext, users: Map<string, string>): HTMLElement {
  let shown: CleanupItem[] = [];
  /** The whole list is selected (every page, also rows not loaded yet). */
  let all = false;
  let stop = false;
  const selected = new Set<string>();
  const { table, tbody } = dataTable("cleanup-table", ["", "图片", "原因", "所有者", "大小", "最近访问", "上传时间"]);
  const selectPage = h("input", { type: "checkbox", id: "cleanup-select-page", "aria-label": "全选本页" });
  table.querySelector("thead th")!.append(selectPage);
  const pager = h("div", { class: "pager", id: "cleanup-pager" });
  const count = h("span", { class: "muted", id: "cleanup-count" });
  const del = h("button", { type: "button", class: "danger", id: "cleanup-delete", disabled: true }, "删除所选");
  const exempt = h("button", { type: "button", id: "cleanup-exempt", disabled: true }, "豁免所选（保留）");
  const selInfo = h("span", { class: "muted", id: "cleanup-selection" });
  const selectAll = h("button", { type: "button", class: "small", id: "cleanup-select-all", hidden: true });
  const clearSel = h("button", { type: "button", class: "small", id: "cleanup-clear", hidden: true }, "取消选择");
  const progress = h("span", { class: "muted", id: "cleanup-progress", "aria-live": "polite" });
  const stopBtn = h("button", { type: "button", class: "small", id: "cleanup-stop", hidden: true }, "停止");
  let running = false;

  const sync = () => {
    const n = all ? paging.total : selected.size;
    del.disabled = exempt.disabled = running || n === 0;
    del.textContent = n ? `删除所选（${n}）` : "删除所选";
    exempt.textContent = n ? `豁免所选（${n}）` : "豁免所选（保留）";
    const pageAll = shown.length > 0 && shown.every((i) => selected.has(i.id));
    selectPage.checked = all || pageAll;
    selectPage.disabled = running || all;
    for (const box of tbody.querySelectorAll<HTMLInputElement>("input[type=checkbox]")) {
      box.disabled = running || all;
      if (all) box.checked = true;
    }
    selInfo.textContent = all ? `已选择待清理的全部 ${paging.total} 张（所有页）` : selected.size ? `已选 ${selected.size} 张` : "";
    selectAll.hidden = all || !pageAll || paging.total <= shown.length;
    selectAll.textContent = `选择全部 ${paging.total} 张（所有页）`;
    clearSel.hidden = !all && selected.size === 0;
    clearSel.disabled = running;
  };
  const row = (i: CleanupItem) => {
    const check = h("input", { type: "checkbox", checked: all || selected.has(i.id), "aria-label": `选择 ${i.file_name}` });
    check.addEventListener("change", () => {
      if (check.checked) selected.add(i.id);
      else selected.delete(i.id);
      sync();
    });
    return h(
      "tr",
      { dataset: { id: i.id } },
      h("td", null, check),
      h(
        "td",
        null,
        h(
          "div",
          { class: "cell-image" },
          thumbImage(ctx, i.id, { mime: i.mime, alt: "", lazy: true, width: 48, height: 36 }),
          h("span", { class: "name" }, i.file_name),
        ),
      ),
      h("td", { dataset: { reason: i.reason } }, REASONS[i.reason] ?? i.reason),
      h("td", null, users.get(i.user_id) ?? i.user_id),
      h("td", null, `${fmtBytes(i.size)} · ${i.width}×${i.height}`),
      h("td", null, fmtTime(i.last_access_at, "从未")),
      h("td", null, fmtTime(i.created_at)),
    );
  };
  const paging = reviewPager<CleanupItem>({
    path: "/api/admin/cleanup",
    pageSize: PAGE_SIZE,
    pager,
    count,
    unit: "张",
    show: (data) => {
      shown = data.items;
      replace(tbody, ...(shown.length ? shown.map(row) : [messageRow(7, "没有待清理的图片")]));
      if (running) for (const b of pager.querySelectorAll("button")) b.disabled = true;
      sync();
    },
    fail: (err, current) => {
      if (current) replace(tbody, messageRow(7, `加载失败：${errorText(err)}`, "error"));
    },
  });
  const { load } = paging;
  const clear = () => {
    all = false;
    selected.clear();
  };

  /**
   * Works through the selection: the chosen ids in batches, or the whole list page by page
   * along the cursor (rows decided meanwhile do not shift it), until the end or 停止.
   */
  const run = async (verb: string, act: (ids: string[], into: Outcome) => Promise<void>) => {
    const o: Outcome = { done: 0, failed: [] };
    const whole = all;
    const goal = whole ? paging.total : selected.size;
    const ids = [...selected];
    running = true;
    stop = false;
    stopBtn.hidden = false;
    sync();
    try {
      let cursor: string | null | undefined;
      for (let i = 0; !stop; i += BATCH) {
        let batch: string[];
        if (whole) {
          const q: string = cursor ? `&cursor=${encodeURIComponent(cursor)}` : "";
          const next: Page<CleanupItem> = await api<Page<CleanupItem>>("GET", `/api/admin/cleanup?page_size=${BATCH}${q}`);
          batch = next.items.map((x) => x.id);
          cursor = next.next_cursor;
        } else batch = ids.slice(i, i + BATCH);
        if (!batch.length) break;
        await act(batch, o);
        progress.textContent = `${verb}中：${o.done + o.failed.length} / ${goal}`;
        if (whole ? !cursor : i + BATCH >= ids.length) break;
      }
      reportBatch(`已${verb}`, o, stop);
    } catch (err) {
      const failed = o.failed.length ? `，${o.failed.length} 张失败` : "";
      toast(`${verb}中断：${errorText(err)}（已${verb} ${o.done} 张${failed}）`, "error");
    } finally {
      running = false;
      stopBtn.hidden = true;
      progress.textContent = "";
      clear();
      await load();
    }
  };

  selectPage.addEventListener("change", () => {
    for (const i of shown) {
      if (selectPage.checked) selected.add(i.id);
      else selected.delete(i.id);
    }
    for (const box of tbody.querySelectorAll<HTMLInputElement>("input[type=checkbox]")) box.checked = selectPage.checked;
    sync();
  });
  selectAll.addEventListener("click", () => {
    all = true;
    sync();
  });
  clearSel.addEventListener("click", () => {
    clear();
    for (const box of tbody.querySelectorAll<HTMLInputElement>("input[type=checkbox]")) box.checked = false;
    sync();
  });
  stopBtn.addEventListener("click", () => {
    stop = true;
    progress.textContent = "正在停止…（当前这一批完成后停止）";
  });
  del.addEventListener("click", () => {
    const n = all ? paging.total : selected.size;
    const what = all ? `待清理列表中的全部 ${n} 张图片` : `选中的 ${n} 张图片`;
    if (!confirm(`删除${what}？此操作不可撤销。`)) return;
    void run("删除", deleteBatch);
  });
  exempt.addEventListener("click", () => void run("豁免", exemptBatch(true)));
  void load();
  return h(
    "section",
    { "aria-labelledby": "cleanup-title" },
    h("div", { class: "toolbar" }, h("h2", { id: "cleanup-title" }, "待清理的图片"), count, del, exempt),
    h(
      "p",
      { class: "muted" },
      ctx.config.cold_cleanup_days ? `超过 ${ctx.config.cold_cleanup_days} 天未被公开访问的图片。` : "冷图判定未开启（设置 → 生命周期与审核 → 冷图判定）。",
      "“已被覆盖”是 S3 客户端向同一对象键再次上传后留下的旧图：/o/ 链接已指向新图，旧图的 /i/ 链接仍可访问并计入占用。",
      "豁免的图片保留且不再提示；到期的限时图片由后台自动删除，不在此列出。",
    ),
    h("div", { class: "toolbar selection-bar" }, selInfo, selectAll, clearSel, progress, stopBtn),
    h("div", { class: "table-wrap" }, table),
    pager,
  );
}
