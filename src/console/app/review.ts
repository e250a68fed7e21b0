// #review (admins): similar-image pairs side by side (merge keeping one side, or dismiss) and
// the cleanup candidates (cold images, and images superseded by a later S3 upload to their key)
// with batch delete and exempt.
import { api } from "./api";
import { busy, errorText, fmtBytes, fmtTime, h, replace, toast } from "./dom";
import { thumbUrl } from "./links";
import type { CleanupItem, DedupCandidate, DedupSide, Image, Page, User, ViewContext } from "./types";
import { dataTable, messageRow, renderPager } from "./ui";

const PAGE_SIZE = 20;

/** Owner names for the image ids shown (the dedup list carries blob facts, not owners). */
async function ownersOf(ids: string[], users: Map<string, string>): Promise<Map<string, string>> {
  const out = new Map<string, string>();
  await Promise.all(
    ids.map(async (id) => {
      try {
        const img = await api<Image>("GET", `/api/admin/images/${encodeURIComponent(id)}`);
        out.set(id, users.get(img.user_id) ?? img.user_id);
      } catch {
        out.set(id, "—");
      }
    }),
  );
  return out;
}

function side(ctx: ViewContext, s: DedupSide, owner: string, label: string): HTMLElement {
  return h(
    "figure",
    { class: "pair-side" },
    h(
      "a",
      { href: `/api/admin/images/${encodeURIComponent(s.image_id)}/thumb`, target: "_blank", rel: "noopener", class: "pair-thumb" },
      h("img", { src: thumbUrl(ctx, s.image_id), alt: `${label}：${s.image_id}` }),
    ),
    h(
      "figcaption",
      null,
      h("strong", null, label),
      ` ${s.width}×${s.height} · ${fmtBytes(s.size)} · ${s.mime.replace("image/", "")}`,
      h("div", { class: "muted" }, `所有者 ${owner} · ${s.refs} 处引用`),
    ),
  );
}

function dedupSection(ctx: ViewContext, users: Map<string, string>): HTMLElement {
  const list = h("div", { class: "pairs", id: "dedup-list" }, h("p", { class: "muted" }, "加载中…"));
  const count = h("span", { class: "muted", id: "dedup-count" });
  const load = async () => {
    try {
      const data = await api<Page<DedupCandidate>>("GET", `/api/admin/dedup?page_size=50`);
      count.textContent = `${data.total} 组`;
      if (!data.items.length) return replace(list, h("p", { class: "empty" }, "没有待处理的相似图片"));
      const owners = await ownersOf(
        data.items.flatMap((c) => [c.a.image_id, c.b.image_id]),
        users,
      );
      replace(list, ...data.items.map((c) => pair(c, owners)));
    } catch (err) {
      replace(list, h("p", { class: "error" }, `加载失败：${errorText(err)}`));
    }
  };
  const pair = (c: DedupCandidate, owners: Map<string, string>): HTMLElement => {
    const act = (label: string, cls: string, run: () => Promise<void>, action: string) => {
      const b = h("button", { type: "button", class: cls, dataset: { action } }, label);
      b.addEventListener(
        "click",
        () =>
          void busy(b, async () => {
            await run();
            await load();
            ctx.refreshAlerts();
          }),
      );
      return b;
    };
    const merge = (keep: DedupSide, label: string) => async () => {
      await api("POST", `/api/admin/dedup/${c.id}/merge`, { keep_blob_id: keep.blob_id });
      toast(`已合并，保留${label}；另一份的图片链接不变，改为指向保留的文件`);
    };
    return h(
      "article",
      { class: "pair", dataset: { id: String(c.id) } },
      h("div", { class: "pair-sides" }, side(ctx, c.a, owners.get(c.a.image_id) ?? "—", "左"), side(ctx, c.b, owners.get(c.b.image_id) ?? "—", "右")),
      h("p", { class: "muted" }, `汉明距离 ${c.distance}（越小越像）· 发现于 ${fmtTime(c.created_at)}`),
      h(
        "div",
        { class: "actions" },
        act("保留左边，合并", "primary", merge(c.a, "左边"), "keep-a"),
        act("保留右边，合并", "", merge(c.b, "右边"), "keep-b"),
        act(
          "不是重复，忽略",
          "",
          async () => {
            await api("POST", `/api/admin/dedup/${c.id}/dismiss`);
            toast("已忽略，之后不再提示这一组");
          },
          "dismiss",
        ),
      ),
    );
  };
  void load();
  return h(
    "section",
    { "aria-labelledby": "dedup-title" },
    h("div", { class: "toolbar" }, h("h2", { id: "dedup-title" }, "相似图片"), count),
    h("p", { class: "muted" }, "合并后，被合并一方的所有图片改为指向保留的文件：图片 ID 和链接都不变，多余的文件在删除宽限期后物理删除。"),
    list,
  );
}

const REASONS: Record<string, string> = { cold: "长期未访问", superseded: "已被覆盖" };

function cleanupSection(ctx: ViewContext, users: Map<string, string>): HTMLElement {
  let page = 1;
  const selected = new Set<string>();
  const { table, tbody } = dataTable("cleanup-table", ["", "图片", "原因", "所有者", "大小", "最近访问", "上传时间"]);
  const pager = h("div", { class: "pager" });
  const count = h("span", { class: "muted" });
  const del = h("button", { type: "button", class: "danger", id: "cleanup-delete", disabled: true }, "删除所选");
  const exempt = h("button", { type: "button", id: "cleanup-exempt", disabled: true }, "豁免所选（保留）");
  const sync = () => {
    del.disabled = exempt.disabled = selected.size === 0;
    del.textContent = selected.size ? `删除所选（${selected.size}）` : "删除所选";
  };
  const row = (i: CleanupItem) => {
    const check = h("input", { type: "checkbox", checked: selected.has(i.id), "aria-label": `选择 ${i.file_name}` });
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
          h("img", { src: thumbUrl(ctx, i.id), alt: "", loading: "lazy", width: 48, height: 36 }),
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
  const show = (p: number) => {
    page = p;
    void load();
  };
  const load = async (): Promise<void> => {
    try {
      const data = await api<Page<CleanupItem>>("GET", `/api/admin/cleanup?page=${page}&page_size=${PAGE_SIZE}`);
      const pages = Math.max(1, Math.ceil(data.total / PAGE_SIZE));
      if (page > pages) {
        page = pages;
        return load();
      }
      count.textContent = `${data.total} 张`;
      replace(tbody, ...(data.items.length ? data.items.map(row) : [messageRow(7, "没有待清理的图片")]));
      renderPager(pager, page, pages, show);
    } catch (err) {
      replace(tbody, messageRow(7, `加载失败：${errorText(err)}`, "error"));
    }
  };
  del.addEventListener("click", () => {
    const ids = [...selected];
    if (!confirm(`删除选中的 ${ids.length} 张图片？此操作不可撤销。`)) return;
    void busy(del, async () => {
      let deleted = 0;
      for (let i = 0; i < ids.length; i += 100) {
        deleted += (await api<{ deleted: number }>("POST", "/api/admin/images/batch-delete", { ids: ids.slice(i, i + 100) })).deleted;
      }
      selected.clear();
      sync();
      toast(`已删除 ${deleted} 张`);
      await load();
    });
  });
  exempt.addEventListener(
    "click",
    () =>
      void busy(exempt, async () => {
        for (const id of selected) await api("PATCH", `/api/admin/images/${encodeURIComponent(id)}`, { cleanup_exempt: true });
        toast(`已豁免 ${selected.size} 张，它们不会再出现在待清理列表`);
        selected.clear();
        sync();
        await load();
      }),
  );
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
    h("div", { class: "table-wrap" }, table),
    pager,
  );
}

export function reviewView(ctx: ViewContext): HTMLElement {
  const body = h("div", { class: "stack" }, h("p", { class: "muted" }, "加载中…"));
  api<Page<User>>("GET", "/api/admin/users").then(
    (u) => {
      const users = new Map(u.items.map((x) => [x.id, x.name]));
      replace(body, dedupSection(ctx, users), cleanupSection(ctx, users));
    },
    (err) => replace(body, h("p", { class: "error" }, `加载失败：${errorText(err)}`)),
  );
  return h("section", { class: "view", id: "review-view" }, h("h1", null, "审核"), body);
}
