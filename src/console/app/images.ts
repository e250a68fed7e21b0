// #images: grid with the list API's filters (owner, token, date range, exempt, file name),
// page numbers plus "load more" (keyset: the API's next_cursor, so appending stays fast however
// deep the library goes), a selection that survives paging and filtering, batch delete, batch
// exempt / un-exempt from cleanup (admins) and batch copy of links in any of the link formats.
// The filters and the page number live in the page's link (#images?search=…&page=2), so they
// survive switching tabs (the tab link carries them) and reloads.
// The batch requests live in image-batch.ts, the detail panel in image-detail.ts.
import { api, query } from "./api";
import { busy, copyText, errorText, fmtBytes, h, replace } from "./dom";
import { deleteImages, setCleanupExempt } from "./image-batch";
import { openImageDetail } from "./image-detail";
import { linkForms } from "../../shared/links";
import { publicUrl, thumbImage } from "./links";
import type { Image, Page, Token, User, ViewContext } from "./types";
import { hashParams, localInputToUtc, pageParam, renderPager, setPageQuery } from "./ui";

const PAGE_SIZE = 24;
/** Requests of 100 tokens read for the token filter, at most. */
const TOKEN_PAGES = 50;

export function imagesView(ctx: ViewContext): HTMLElement {
  const isAdmin = ctx.me.user.role === "admin";
  const wanted = hashParams();
  let page = pageParam(wanted);
  /** Pages appended by "load more" after `page`; the pager marks the last one loaded. */
  let extra = 0;
  let total = 0;
  let nextCursor: string | null = null;
  /** Selected images by id, kept across pages so links and deletes can span them. */
  const selected = new Map<string, Image>();
  let shown: Image[] = [];

  const grid = h("div", { class: "grid", id: "image-grid" });
  const pager = h("div", { class: "pager", id: "image-pager" });
  const count = h("span", { class: "muted", id: "image-count" });
  const more = h("button", { type: "button", id: "image-more", hidden: true }, "加载更多");
  const search = h("input", { type: "search", name: "search", placeholder: "文件名关键字", "aria-label": "按文件名搜索" });
  const owner = h("select", { name: "owner", "aria-label": "所有者" }, h("option", { value: "" }, "全部用户"));
  const token = h("select", { name: "token", "aria-label": "上传令牌" }, h("option", { value: "" }, "全部来源"));
  const since = h("input", { type: "date", name: "since", "aria-label": "起始日期" });
  const until = h("input", { type: "date", name: "until", "aria-label": "结束日期（含当天）" });
  const exempt = h("input", { type: "checkbox", name: "exempt" });
  const selectPage = h("input", { type: "checkbox", name: "select_page" });
  const selInfo = h("span", { class: "muted", id: "selection-info" });
  const format = h("select", { name: "link_format", "aria-label": "链接格式" });
  const copyLinks = h("button", { type: "button", id: "copy-selected", disabled: true }, "复制链接");
  const deleteSelected = h("button", { type: "button", class: "danger", id: "delete-selected", disabled: true }, "删除所选");
  const clearSel = h("button", { type: "button", class: "link", id: "clear-selection", hidden: true }, "取消选择");
  // batch-exempt is admin-only on the server: plain users get neither button.
  const exemptSelected = isAdmin ? h("button", { type: "button", id: "exempt-selected", disabled: true }, "豁免清理") : null;
  const unexemptSelected = isAdmin ? h("button", { type: "button", id: "unexempt-selected", disabled: true }, "取消豁免") : null;

  // Until the user and token lists arrive, an id from the link stands as its own option so it filters at once.
  if (isAdmin && wanted.get("user")) owner.append(h("option", { value: wanted.get("user")! }, wanted.get("user")!));
  owner.value = wanted.get("user") ?? "";
  const linkedToken = wanted.get("token") ?? "";
  if (linkedToken) token.append(h("option", { value: linkedToken }, `令牌 #${linkedToken}`));
  token.value = linkedToken;
  search.value = wanted.get("search") ?? "";
  since.value = wanted.get("since") ?? "";
  until.value = wanted.get("until") ?? "";
  exempt.checked = wanted.get("exempt") === "1";
  for (const f of linkForms("x", "x")) format.append(h("option", { value: f.label }, f.label));

  const updateSelection = () => {
    const n = selected.size;
    deleteSelected.disabled = copyLinks.disabled = n === 0;
    for (const b of [exemptSelected, unexemptSelected]) if (b) b.disabled = n === 0;
    deleteSelected.textContent = n ? `删除所选（${n}）` : "删除所选";
    selInfo.textContent = n ? `已选 ${n} 张（可跨页）` : "";
    clearSel.hidden = n === 0;
    selectPage.checked = shown.length > 0 && shown.every((i) => selected.has(i.id));
  };

  const card = (img: Image): HTMLElement => {
    const check = h("input", { type: "checkbox", checked: selected.has(img.id), "aria-label": `选择 ${img.file_name}` });
    check.addEventListener("change", () => {
      if (check.checked) selected.set(img.id, img);
      else selected.delete(img.id);
      updateSelection();
    });
    const open = () => openImageDetail(ctx, img.id, load);
    return h(
      "figure",
      { class: "tile", dataset: { id: img.id } },
      h(
        "button",
        { type: "button", class: "thumb", title: "查看详情", onclick: open },
        thumbImage(ctx, img.id, { mime: img.mime, alt: img.file_name, lazy: true }),
      ),
      h(
        "figcaption",
        null,
        h("label", { class: "pick" }, check),
        h("span", { class: "name", title: img.file_name }, img.file_name),
        h("span", { class: "muted" }, `${img.width}×${img.height} · ${fmtBytes(img.size)}`),
        img.expire_at ? h("span", { class: "badge warn", title: `到期：${img.expire_at} UTC` }, "限时") : null,
        img.cleanup_exempt ? h("span", { class: "badge muted" }, "豁免清理") : null,
      ),
    );
  };

  const filters = () => {
    // Dates are whole local days: "until" includes the chosen day.
    const end = until.value ? new Date(`${until.value}T00:00`) : undefined;
    if (end) end.setDate(end.getDate() + 1);
    return {
      search: search.value.trim(),
      user_id: isAdmin ? owner.value : undefined,
      token_id: token.value,
      since: since.value ? localInputToUtc(`${since.value}T00:00`) : "",
      until: end ? localInputToUtc(`${end.getFullYear()}-${String(end.getMonth() + 1).padStart(2, "0")}-${String(end.getDate()).padStart(2, "0")}T00:00`) : "",
      exempt: exempt.checked ? "1" : "",
    };
  };

  /** The latest load: an earlier one answering late (the list before a search) must not replace its result. */
  let loads = 0;

  async function load(): Promise<void> {
    const mine = ++loads;
    try {
      const f = filters();
      const data = await api<Page<Image>>("GET", `/api/admin/images${query({ page, page_size: PAGE_SIZE, ...f })}`);
      if (mine !== loads) return;
      const pages = Math.max(1, Math.ceil(data.total / PAGE_SIZE));
      if (page > pages) {
        page = pages;
        return load();
      }
      setPageQuery("images", {
        user: isAdmin ? owner.value : undefined,
        token: token.value,
        search: search.value.trim(),
        since: since.value,
        until: until.value,
        exempt: exempt.checked ? "1" : undefined,
        page: page > 1 ? page : undefined,
      });
      shown = data.items;
      extra = 0;
      total = data.total;
      nextCursor = data.next_cursor ?? null;
      const filtered = Object.values(f).some((v) => v);
      replace(
        grid,
        ...(data.items.length ? data.items.map(card) : [h("p", { class: "empty" }, filtered ? "没有匹配的图片" : "还没有图片，去“上传”页传一张吧")]),
      );
      showPosition();
      updateSelection();
    } catch (err) {
      if (mine === loads) replace(grid, h("p", { class: "error" }, `加载失败：${errorText(err)}`));
    }
  }

  /** Count line, pager and the "load more" button for what the grid holds now. */
  function showPosition() {
    const pages = Math.max(1, Math.ceil(total / PAGE_SIZE));
    const last = page + extra;
    count.textContent = extra ? `共 ${total} 张 · 第 ${page}–${last} / ${pages} 页（已显示 ${shown.length} 张）` : `共 ${total} 张 · 第 ${page} / ${pages} 页`;
    renderPager(
      pager,
      last,
      pages,
      (p) => {
        page = p;
        void load();
      },
      { jump: true },
    );
    more.hidden = !nextCursor;
  }

  /** Appends the next page below the grid by cursor (no OFFSET scan on the server). */
  async function loadMore(): Promise<void> {
    if (!nextCursor) return;
    const data = await api<Page<Image>>("GET", `/api/admin/images${query({ cursor: nextCursor, page_size: PAGE_SIZE, ...filters() })}`);
    const fresh = data.items.filter((img) => !shown.some((s) => s.id === img.id));
    shown = [...shown, ...fresh];
    grid.append(...fresh.map(card));
    extra += 1;
    total = data.total;
    nextCursor = data.next_cursor ?? null;
    showPosition();
    updateSelection();
  }
  more.addEventListener("click", () => void busy(more, loadMore));

  /** Token choices follow the owner filter (admins) or are the person's own tokens: all of them, 100 per request. */
  let tokenLoads = 0;
  async function loadTokens(): Promise<void> {
    const user = isAdmin ? owner.value : "";
    const load = ++tokenLoads;
    // The chosen token (from the link) keeps filtering while its list loads: its option stays until the real one arrives.
    const keep = token.value;
    const held = keep ? [...token.options].find((o) => o.value === keep) : undefined;
    replace(token, h("option", { value: "" }, "全部来源"), held);
    token.value = keep;
    if (isAdmin && !user) return;
    try {
      for (let p = 1, seen = 0; p <= TOKEN_PAGES; p++) {
        const data = await api<Page<Token>>("GET", `/api/admin/tokens${query({ page: p, page_size: 100, user_id: user })}`);
        // The owner changed meanwhile: a newer load fills the list.
        if (load !== tokenLoads) return;
        for (const t of data.items) {
          if (String(t.id) === keep) held?.remove();
          token.append(h("option", { value: String(t.id) }, t.name));
        }
        token.value = keep;
        seen += data.items.length;
        if (!data.items.length || seen >= data.total) break;
      }
    } catch {
      // The token filter is optional; the list still works without it.
    }
  }

  selectPage.addEventListener("change", () => {
    for (const img of shown) {
      if (selectPage.checked) selected.set(img.id, img);
      else selected.delete(img.id);
    }
    for (const box of grid.querySelectorAll<HTMLInputElement>(".pick input")) box.checked = selectPage.checked;
    updateSelection();
  });
  clearSel.addEventListener("click", () => {
    selected.clear();
    for (const box of grid.querySelectorAll<HTMLInputElement>(".pick input")) box.checked = false;
    updateSelection();
  });
  copyLinks.addEventListener("click", () => {
    const lines = [...selected.values()].map(
      (img) => linkForms(publicUrl(ctx, img.url), img.file_name).find((f) => f.label === format.value)?.text ?? publicUrl(ctx, img.url),
    );
    void copyText(lines.join("\n"));
  });
  deleteSelected.addEventListener("click", () => {
    const ids = [...selected.keys()];
    if (!ids.length || !confirm(`确定删除选中的 ${ids.length} 张图片？此操作不可撤销。`)) return;
    void busy(deleteSelected, async () => {
      await deleteImages(ids);
      selected.clear();
      await load();
    });
  });
  /** Sets or clears the exemption of the whole selection, then shows the grid (badges, the exempt filter) as it is now. */
  const exemptAction = (button: HTMLButtonElement | null, exempt: boolean) =>
    button?.addEventListener("click", () => {
      const ids = [...selected.keys()];
      if (!ids.length) return;
      void busy(button, async () => {
        await setCleanupExempt(ids, exempt);
        // Cleared like after a delete: an un-exempted image may leave the filtered grid, and a
        // selection nobody can see any more should not ride along into the next action.
        selected.clear();
        await load();
      });
    });
  exemptAction(exemptSelected, true);
  exemptAction(unexemptSelected, false);

  const refilter = () => {
    page = 1;
    void load();
  };
  let timer: ReturnType<typeof setTimeout> | undefined;
  search.addEventListener("input", () => {
    clearTimeout(timer);
    timer = setTimeout(refilter, 300);
  });
  for (const el of [token, since, until, exempt]) el.addEventListener("change", refilter);
  owner.addEventListener("change", () => {
    token.value = "";
    void loadTokens();
    refilter();
  });
  if (isAdmin) {
    api<Page<User>>("GET", "/api/admin/users").then(
      (u) => {
        const keep = owner.value;
        const unknown = keep && !u.items.some((x) => x.id === keep) ? h("option", { value: keep }, keep) : null;
        replace(owner, h("option", { value: "" }, "全部用户"), ...u.items.map((x) => h("option", { value: x.id }, x.name)), unknown);
        owner.value = keep;
      },
      () => undefined,
    );
  }
  void loadTokens();
  void load();
  const lab = (text: string, el: HTMLElement) => h("label", { class: "field" }, h("span", null, text), el);
  return h(
    "section",
    { class: "view" },
    h("div", { class: "toolbar" }, h("h1", null, "图片"), count),
    h(
      "div",
      { class: "filters", id: "image-filters" },
      lab("文件名", search),
      isAdmin ? lab("所有者", owner) : null,
      lab("来源令牌", token),
      lab("从", since),
      lab("到", until),
      h("label", { class: "inline-check" }, exempt, "只看豁免清理的"),
    ),
    h(
      "div",
      { class: "toolbar selection-bar" },
      h("label", { class: "inline-check" }, selectPage, "全选本页"),
      selInfo,
      clearSel,
      format,
      copyLinks,
      exemptSelected,
      unexemptSelected,
      deleteSelected,
    ),
    grid,
    h("div", { class: "load-more" }, more),
    pager,
  );
}
