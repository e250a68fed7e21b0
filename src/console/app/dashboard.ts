// #dashboard: the administrator's landing page (site totals, per-user and per-channel usage,
// channel health, the off-site warning, top images, open alerts, pending review) — or, for a
// regular user, their own usage against the quota.
import { api } from "./api";
import { badge, errorText, fmtBytes, fmtTime, h, replace } from "./dom";
import { openImageDetail } from "./image-detail";
import { ALERT_KINDS } from "./labels";
import { thumbImage } from "./links";
import type { AdminDashboard, Alert, Channel, Page, TopImage, UserDashboard, ViewContext } from "./types";
import { dataTable, messageRow, percent, stat } from "./ui";

function topImages(ctx: ViewContext, items: TopImage[]): HTMLElement {
  if (!items.length) return h("p", { class: "muted" }, "还没有图片");
  return h(
    "ol",
    { class: "top-images", id: "top-images" },
    ...items.map((t) =>
      h(
        "li",
        null,
        thumbImage(ctx, t.id, { alt: "", lazy: true, width: 48, height: 36 }),
        // Opens that image's detail (links, replicas, delete), not just the images tab.
        h(
          "a",
          {
            href: "#images",
            class: "name",
            title: t.file_name,
            dataset: { id: t.id },
            onclick: (e: Event) => {
              e.preventDefault();
              const link = e.currentTarget as HTMLElement;
              // A delete or change there reloads the dashboard (dashboardView listens).
              openImageDetail(ctx, t.id, () => link.dispatchEvent(new Event("image-changed", { bubbles: true })));
            },
          },
          t.file_name,
        ),
        h("span", { class: "muted" }, `${t.access_count} 次 · ${fmtBytes(t.size)}`),
      ),
    ),
  );
}

function alertItems(alerts: Alert[]): HTMLElement {
  if (!alerts.length) return h("p", { class: "muted", id: "dashboard-alerts" }, "没有未解除的告警");
  return h(
    "ul",
    { class: "stack", id: "dashboard-alerts" },
    ...alerts.map((a) =>
      h(
        "li",
        { class: "notice bad" },
        badge(ALERT_KINDS[a.kind] ?? a.kind, "bad"),
        " ",
        h("strong", null, a.target || "—"),
        ` · ${a.message} · ${fmtTime(a.opened_at)}`,
      ),
    ),
  );
}

function channelHealth(c: Channel): HTMLElement {
  if (c.deleting) return badge("清空中", "warn");
  if (!c.last_checked_at && !c.last_error) return badge("未探测", "muted");
  return c.healthy ? badge("健康", "ok") : badge("异常", "bad");
}

function adminView(ctx: ViewContext, d: AdminDashboard, channels: Channel[], alerts: Alert[]): HTMLElement[] {
  const bytesById = new Map(d.channels.map((c) => [c.id, c.bytes]));
  const ch = dataTable("dashboard-channels", ["渠道", "类型", "状态", "已存", "副本（完成/等待/失败）", "最近错误"]);
  replace(
    ch.tbody,
    ...(channels.length
      ? channels.map((c) =>
          h(
            "tr",
            { dataset: { id: String(c.id) } },
            h("td", null, h("strong", null, c.name)),
            h("td", null, c.driver),
            h("td", null, channelHealth(c)),
            h("td", null, fmtBytes(bytesById.get(c.id) ?? 0)),
            h("td", null, `${c.replicas.done} / ${c.replicas.pending} / ${c.replicas.failed}`),
            h("td", { class: "wrap" }, c.last_error || "—"),
          ),
        )
      : [messageRow(6, "没有存储渠道")]),
  );
  const us = dataTable("dashboard-users", ["用户", "图片", "占用", "访问次数", "估算流量"]);
  replace(
    us.tbody,
    ...d.per_user.map((u) =>
      h(
        "tr",
        null,
        h("td", null, h("a", { href: `#images?user=${encodeURIComponent(u.id)}` }, u.name)),
        h("td", null, u.images),
        h("td", null, fmtBytes(u.storage_bytes)),
        h("td", null, u.total_accesses),
        h("td", null, fmtBytes(u.traffic_estimate_bytes)),
      ),
    ),
  );
  const pending = d.pending_dedup + d.pending_cleanup;
  return [
    d.offsite_missing
      ? h(
          "div",
          { class: "notice warn", id: "offsite-warning", role: "alert" },
          h("strong", null, "没有异地备份："),
          "当前没有健康的非本地渠道，图片和元数据快照都只在这台机器的磁盘上，磁盘损坏会丢失全部图片。",
          h("a", { href: "#channels" }, "去添加 S3、WebDAV 或网盘渠道"),
        )
      : null,
    h(
      "div",
      { class: "stats" },
      stat("图片", d.images),
      stat("存储占用", fmtBytes(d.storage_bytes)),
      stat("用户", d.users),
      stat("访问次数", d.total_accesses),
      stat("估算流量", fmtBytes(d.traffic_estimate_bytes), "访问次数 × 原图大小"),
      stat("待审核", h("a", { href: "#review" }, pending), `相似 ${d.pending_dedup} 组 · 待清理 ${d.pending_cleanup} 张`, "pending-review"),
    ),
    h("h2", null, "未解除的告警"),
    alertItems(alerts),
    h("h2", null, "存储渠道"),
    ch.table,
    h("h2", null, "按用户"),
    us.table,
    h("h2", null, "热门图片"),
    topImages(ctx, d.top_images),
  ].filter((x): x is HTMLElement => !!x);
}

function userView(ctx: ViewContext, d: UserDashboard): HTMLElement[] {
  const used = percent(d.storage_bytes, d.quota_bytes);
  return [
    h(
      "div",
      { class: "stats" },
      stat("我的图片", d.images),
      stat(
        "已用空间",
        fmtBytes(d.storage_bytes),
        d.quota_bytes === null ? "配额不限" : `配额 ${fmtBytes(d.quota_bytes)}，剩余 ${fmtBytes(Math.max(0, d.quota_bytes - d.storage_bytes))}`,
        "my-usage",
      ),
      stat("访问次数", d.total_accesses),
      stat("估算流量", fmtBytes(d.traffic_estimate_bytes)),
    ),
    d.quota_bytes !== null
      ? h("div", { class: "quota" }, h("progress", { max: 100, value: used, "aria-label": "配额使用比例" }), h("span", null, `已用 ${used}%`))
      : h("span"),
    h("h2", null, "我的热门图片"),
    topImages(ctx, d.top_images),
  ];
}

export function dashboardView(ctx: ViewContext): HTMLElement {
  const body = h("div", { class: "stack" }, h("p", { class: "muted" }, "加载中…"));
  const isAdmin = ctx.me.user.role === "admin";
  const load = async () => {
    try {
      if (isAdmin) {
        const [d, channels, alerts] = await Promise.all([
          api<AdminDashboard>("GET", "/api/admin/dashboard"),
          api<Page<Channel>>("GET", "/api/admin/channels"),
          api<Page<Alert>>("GET", "/api/admin/alerts"),
        ]);
        replace(body, ...adminView(ctx, d, channels.items, alerts.items));
      } else {
        replace(body, ...userView(ctx, await api<UserDashboard>("GET", "/api/admin/dashboard")));
      }
    } catch (err) {
      replace(body, h("p", { class: "error" }, `加载失败：${errorText(err)}`));
    }
  };
  void load();
  body.addEventListener("image-changed", () => void load());
  return h(
    "section",
    { class: "view", id: "dashboard-view" },
    h("div", { class: "toolbar" }, h("h1", null, isAdmin ? "概览" : "我的用量"), h("button", { type: "button", onclick: () => void load() }, "刷新")),
    body,
  );
}
