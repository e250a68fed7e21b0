// Images tab: paged grid with session-authenticated thumbnails, file-name search,
// single and batch delete. The detail panel lives in image-detail.ts.
import { api, query } from "./api";
import { busy, errorText, fmtBytes, h, replace, toast } from "./dom";
import { openImageDetail } from "./image-detail";
import { thumbUrl } from "./links";
import type { Image, Page, ViewContext } from "./types";

const PAGE_SIZE = 24;

export function imagesView(ctx: ViewContext): HTMLElement {
  let page = 1;
  let search = "";
  const selected = new Set<string>();

  const grid = h("div", { class: "grid", id: "image-grid" });
  const pager = h("div", { class: "pager" });
  const count = h("span", { class: "muted" });
  const searchInput = h("input", { type: "search", name: "search", placeholder: "按文件名搜索" });
  const deleteSelected = h("button", { type: "button", class: "danger", id: "delete-selected", disabled: true }, "删除所选");
  const selectAll = h("input", { type: "checkbox", title: "全选本页" });

  const updateSelection = () => {
    deleteSelected.disabled = selected.size === 0;
    deleteSelected.textContent = selected.size ? `删除所选（${selected.size}）` : "删除所选";
  };

  const card = (img: Image): HTMLElement => {
    const check = h("input", { type: "checkbox", checked: selected.has(img.id), title: "选择" });
    check.addEventListener("change", () => {
      if (check.checked) selected.add(img.id);
      else selected.delete(img.id);
      updateSelection();
    });
    const open = () => openImageDetail(ctx, img.id, load);
    return h(
      "figure",
      { class: "tile", dataset: { id: img.id } },
      h("button", { type: "button", class: "thumb", title: "查看详情", onclick: open }, h("img", { src: thumbUrl(ctx, img.id), alt: img.file_name, loading: "lazy", decoding: "async" })),
      h(
        "figcaption",
        null,
        h("label", { class: "pick" }, check),
        h("span", { class: "name", title: img.file_name }, img.file_name),
        h("span", { class: "muted" }, `${img.width}×${img.height} · ${fmtBytes(img.size)}`),
        img.expire_at ? h("span", { class: "badge warn", title: `到期：${img.expire_at} UTC` }, "限时") : null,
      ),
    );
  };

  async function load(): Promise<void> {
    try {
      const data = await api<Page<Image>>("GET", `/api/admin/images${query({ page, page_size: PAGE_SIZE, search })}`);
      const pages = Math.max(1, Math.ceil(data.total / PAGE_SIZE));
      if (page > pages) {
        page = pages;
        return load();
      }
      for (const id of [...selected]) if (!data.items.some((i) => i.id === id)) selected.delete(id);
      updateSelection();
      selectAll.checked = data.items.length > 0 && data.items.every((i) => selected.has(i.id));
      count.textContent = `共 ${data.total} 张`;
      replace(grid, ...(data.items.length ? data.items.map(card) : [h("p", { class: "empty" }, search ? "没有匹配的图片" : "还没有图片，去“上传”页传一张吧")]));
      replace(
        pager,
        h("button", { type: "button", disabled: page <= 1, onclick: () => ((page -= 1), void load()) }, "上一页"),
        h("span", null, `第 ${page} / ${pages} 页`),
        h("button", { type: "button", disabled: page >= pages, onclick: () => ((page += 1), void load()) }, "下一页"),
      );
    } catch (err) {
      replace(grid, h("p", { class: "error" }, `加载失败：${errorText(err)}`));
    }
  }

  selectAll.addEventListener("change", () => {
    for (const box of grid.querySelectorAll<HTMLElement>(".tile")) {
      const id = box.dataset.id!;
      const cb = box.querySelector<HTMLInputElement>(".pick input")!;
      cb.checked = selectAll.checked;
      if (selectAll.checked) selected.add(id);
      else selected.delete(id);
    }
    updateSelection();
  });

  deleteSelected.addEventListener("click", () => {
    const ids = [...selected];
    if (!ids.length || !confirm(`确定删除选中的 ${ids.length} 张图片？此操作不可撤销。`)) return;
    void busy(deleteSelected, async () => {
      const res = await api<{ deleted: number; failed: { id: string; error: string }[] }>("POST", "/api/admin/images/batch-delete", { ids: ids.slice(0, 100) });
      selected.clear();
      if (res.failed.length) toast(`已删除 ${res.deleted} 张，${res.failed.length} 张失败：${res.failed[0]!.error}`, "error");
      else toast(`已删除 ${res.deleted} 张`);
      await load();
    });
  });

  let timer: ReturnType<typeof setTimeout> | undefined;
  searchInput.addEventListener("input", () => {
    clearTimeout(timer);
    timer = setTimeout(() => {
      search = searchInput.value.trim();
      page = 1;
      void load();
    }, 300);
  });

  void load();
  return h(
    "section",
    { class: "view" },
    h("div", { class: "toolbar" }, h("h1", null, "图片"), searchInput, h("label", { class: "inline-check" }, selectAll, "全选"), deleteSelected, count),
    grid,
    pager,
  );
}
