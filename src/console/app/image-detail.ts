// Image detail panel: metadata, links, per-channel replica state, expiry (PATCH ttl_hours),
// cleanup exemption (admins) and delete.
import { api } from "./api";
import { badge, busy, copyButton, errorText, fmtBytes, fmtTime, h, openModal, replace, safeHref, toast } from "./dom";
import { linkForms } from "../../shared/links";
import { replicaStateName } from "../../shared/replica-states";
import { publicUrl, thumbUrl } from "./links";
import type { Image, Replica, ViewContext } from "./types";

const REPLICA_BADGES: Record<string, "ok" | "warn" | "bad"> = { done: "ok", pending: "warn", failed: "bad" };

function replicaTable(replicas: Replica[]): HTMLElement {
  if (!replicas.length) return h("p", { class: "muted" }, "没有副本记录");
  return h(
    "table",
    { class: "table replicas" },
    h("thead", null, h("tr", null, h("th", null, "渠道"), h("th", null, "状态"), h("th", null, "尝试"), h("th", null, "更新时间"), h("th", null, "最近错误"))),
    h(
      "tbody",
      null,
      ...replicas.map((r) => {
        const label = replicaStateName(r.state);
        const kind = REPLICA_BADGES[r.state] ?? "muted";
        return h(
          "tr",
          null,
          h("td", null, r.channel_name),
          h("td", null, badge(label, kind)),
          h("td", null, r.attempts),
          h("td", null, fmtTime(r.updated_at)),
          h("td", { class: "wrap" }, r.last_error || "—"),
        );
      }),
    ),
  );
}

function facts(rows: [string, string | Node][]): HTMLElement {
  return h("dl", { class: "facts" }, ...rows.flatMap(([k, v]) => [h("dt", null, k), h("dd", null, v)]));
}

function expiryText(img: Image): string {
  if (!img.expire_at) return "永久";
  return `${fmtTime(img.expire_at)}（有效期 ${Math.round((img.ttl_seconds ?? 0) / 3600)} 小时）`;
}

function render(ctx: ViewContext, img: Image, body: HTMLElement, close: () => void, changed: () => void): void {
  const url = publicUrl(ctx, img.url);
  const href = safeHref(url);
  const isOwner = img.user_id === ctx.me.user.id;

  const ttl = h("input", {
    type: "number",
    min: 0,
    max: 876000,
    step: 1,
    name: "ttl_hours",
    class: "narrow",
    value: img.ttl_seconds ? String(Math.round(img.ttl_seconds / 3600)) : "0",
  });
  const ttlSave = h("button", { type: "submit" }, "保存");
  const ttlForm = h("form", { class: "inline", id: "ttl-form" }, h("label", null, "有效期（小时，0 为永久，从现在起计）", ttl), ttlSave);
  ttlForm.addEventListener("submit", (e) => {
    e.preventDefault();
    void busy(ttlSave, async () => {
      const updated = await api<Image>("PATCH", `/api/admin/images/${encodeURIComponent(img.id)}`, { ttl_hours: Number(ttl.value) });
      toast("有效期已更新");
      render(ctx, updated, body, close, changed);
      changed();
    });
  });

  let exempt: HTMLElement | null = null;
  if (ctx.me.user.role === "admin") {
    const box = h("input", { type: "checkbox", checked: img.cleanup_exempt });
    box.addEventListener("change", () => {
      void busy(null, async () => {
        try {
          const updated = await api<Image>("PATCH", `/api/admin/images/${encodeURIComponent(img.id)}`, { cleanup_exempt: box.checked });
          toast(updated.cleanup_exempt ? "已设为清理豁免" : "已取消清理豁免");
        } catch (err) {
          box.checked = !box.checked;
          throw err;
        }
      });
    });
    exempt = h("label", { class: "inline-check" }, box, "清理豁免（冷图清理时保留）");
  }

  const del = h("button", { type: "button", class: "danger", id: "detail-delete" }, "删除图片");
  del.addEventListener("click", () => {
    if (!confirm(`确定删除“${img.file_name}”？此操作不可撤销。`)) return;
    void busy(del, async () => {
      await api("DELETE", `/api/admin/images/${encodeURIComponent(img.id)}`);
      toast("已删除");
      close();
      changed();
    });
  });

  replace(
    body,
    h(
      "div",
      { class: "detail" },
      h(
        "a",
        { class: "detail-preview", href: thumbUrl(ctx, img.id, true), target: "_blank", rel: "noopener" },
        h("img", { src: thumbUrl(ctx, img.id, true), alt: img.file_name }),
      ),
      h(
        "div",
        { class: "detail-info" },
        facts([
          ["文件名", img.file_name],
          ["ID", img.id],
          ["类型", img.mime],
          ["大小", fmtBytes(img.size)],
          ["尺寸", `${img.width} × ${img.height}`],
          ["上传时间", fmtTime(img.created_at)],
          ["来源", img.token_name ? `令牌 ${img.token_name}` : "控制台"],
          ["访问", `${img.access_count} 次，最近 ${fmtTime(img.last_access_at, "从未")}`],
          ["过期", expiryText(img)],
          ...ownerFacts(ctx, img),
          ["SHA-256", h("code", { class: "hash" }, img.sha256)],
        ]),
        h("div", { class: "result-url" }, href ? h("a", { href, target: "_blank", rel: "noopener" }, url) : url),
        h("div", { class: "copy-row" }, ...linkForms(url, img.file_name, ctx.config.process_widths).map((f) => copyButton(`复制 ${f.label}`, () => f.text))),
      ),
    ),
    h("h3", null, "存储副本"),
    replicaTable(img.replicas ?? []),
    h("h3", null, "设置"),
    isOwner ? ttlForm : h("p", { class: "muted" }, "只有图片的所有者可以修改有效期。"),
    exempt,
    h("div", { class: "actions" }, del),
  );
}

/**
 * Who owns the image (admins see others' images), how many images share its bytes (a delete frees
 * the file only with the last), and whether it waits in the review tab's cleanup list.
 */
function ownerFacts(ctx: ViewContext, img: Image): [string, string | Node][] {
  const out: [string, string | Node][] = [];
  if (ctx.me.user.role === "admin") {
    out.push([
      "所有者",
      img.user_id === ctx.me.user.id
        ? "我"
        : h("a", { href: `#images?user=${encodeURIComponent(img.user_id)}`, id: "detail-owner" }, h("code", null, img.user_id), " · 查看其图片"),
    ]);
  }
  out.push(["文件引用", img.ref_count > 1 ? `${img.ref_count} 张图片共用这份文件，最后一张删除后才释放存储` : "仅此一张"]);
  out.push(["待清理", img.pending_cleanup ? badge("在待清理列表中", "warn") : "否"]);
  return out;
}

export function openImageDetail(ctx: ViewContext, id: string, changed: () => void): void {
  const modal = openModal("图片详情", h("p", { class: "muted" }, "加载中…"));
  modal.dialog.classList.add("wide");
  modal.dialog.id = "image-detail";
  api<Image>("GET", `/api/admin/images/${encodeURIComponent(id)}`).then(
    (img) => render(ctx, img, modal.body, modal.close, changed),
    (err) => replace(modal.body, h("p", { class: "error" }, `加载失败：${errorText(err)}`)),
  );
}
