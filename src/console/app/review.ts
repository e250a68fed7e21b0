// #review (admins): similar-image pairs side by side (merge keeping one side, or dismiss), paged,
// and the cleanup candidates (./review-cleanup.ts).
import { api } from "./api";
import { busy, errorText, fmtBytes, fmtTime, h, replace, toast } from "./dom";
import { thumbImage } from "./links";
import { cleanupSection } from "./review-cleanup";
import { reviewPager } from "./review-pager";
import type { DedupCandidate, DedupSide, Image, Page, User, ViewContext } from "./types";

/** Pairs per page of the similar-image list. */
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
      thumbImage(ctx, s.image_id, { mime: s.mime, alt: `${label}：${s.image_id}` }),
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
  const pager = h("div", { class: "pager", id: "dedup-pager" });
  const { load } = reviewPager<DedupCandidate>({
    path: "/api/admin/dedup",
    pageSize: PAGE_SIZE,
    pager,
    count,
    unit: "组",
    show: async (data, current) => {
      if (!data.items.length) return replace(list, h("p", { class: "empty" }, "没有待处理的相似图片"));
      const owners = await ownersOf(
        data.items.flatMap((c) => [c.a.image_id, c.b.image_id]),
        users,
      );
      if (current()) replace(list, ...data.items.map((c) => pair(c, owners)));
    },
    // A late failure of an older load must not replace the newer list.
    fail: (err, current) => {
      if (current) replace(list, h("p", { class: "error" }, `加载失败：${errorText(err)}`));
    },
  });
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
