// Image detail panel: metadata, links, per-channel replica state, expiry (PATCH ttl_hours),
// cleanup exemption (admins) and delete.
import { api } from "./api";
import { badge, busy, copyButton, errorText, fmtBytes, fmtTime, h, openModal, parseUtc, replace, safeHref, toast } from "./dom";
import { linkForms } from "../../shared/links";
import { replicaStateName } from "../../shared/replica-states";
import { publicUrl, thumbImage, thumbUrl } from "./links";
import type { Image, Replica, ViewContext } from "./types";
import { fmtDuration, hoursProblem, MAX_HOURS } from "./ui";

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

/** When it expires, how long is left and its lifetime, to the minute: a 20-minute image is no "0 小时" one. */
function expiryText(img: Image): string {
  if (!img.expire_at) return "永久";
  const left = (parseUtc(img.expire_at).getTime() - Date.now()) / 1000;
  const remaining = left > 0 ? `剩余 ${fmtDuration(left)}` : "已到期";
  return `${fmtTime(img.expire_at)}（${remaining}${img.ttl_seconds ? `；有效期 ${fmtDuration(img.ttl_seconds)}` : ""}）`;
}

/**
 * The lifetime field's starting text: whole hours as they are, 0 for permanent, and nothing for a
 * lifetime that is no whole number of hours (20 minutes is no "0"; 0 would make it permanent).
 */
function ttlStart(img: Image): string {
  if (!img.ttl_seconds) return img.expire_at ? "" : "0";
  return img.ttl_seconds % 3600 === 0 ? String(img.ttl_seconds / 3600) : "";
}

function render(ctx: ViewContext, img: Image, body: HTMLElement, close: () => void, changed: () => void): void {
  const url = publicUrl(ctx, img.url);
  const href = safeHref(url);
  const isOwner = img.user_id === ctx.me.user.id;

  const start = ttlStart(img);
  const ttl = h("input", {
    type: "number",
    min: 0,
    max: MAX_HOURS,
    step: 1,
    name: "ttl_hours",
    class: "narrow",
    value: start,
    placeholder: start === "" && img.ttl_seconds ? `当前 ${fmtDuration(img.ttl_seconds)}` : "",
  });
  const ttlSave = h("button", { type: "submit" }, "保存");
  const ttlError = h("small", { class: "field-error", role: "alert", id: "ttl-error" });
  const ttlForm = h(
    "form",
    { class: "inline", id: "ttl-form", novalidate: true },
    h("label", null, "有效期（小时，0 为永久，从现在起计）", ttl),
    ttlSave,
    ttlError,
  );
  ttl.addEventListener("input", () => (ttlError.textContent = ""));
  ttlForm.addEventListener("submit", (e) => {
    e.preventDefault();
    // Only a lifetime the person typed is sent: saving what was shown must not reset the expiry,
    // least of all turn an expiring image permanent.
    if (ttl.value.trim() === start && !ttl.validity.badInput) {
      ttlError.textContent = start === "" ? "请先填写新的有效期（小时）" : "有效期没有改动";
      return;
    }
    const problem = hoursProblem(ttl.validity.badInput ? "x" : ttl.value, 0, true);
    if (problem) {
      ttlError.textContent = problem;
      ttl.focus();
      return;
    }
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
        { class: "detail-preview", href: thumbUrl(ctx, img.id, img.mime, true), target: "_blank", rel: "noopener" },
        thumbImage(ctx, img.id, { mime: img.mime, large: true, alt: img.file_name }),
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
