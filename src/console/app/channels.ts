// Storage channels (admins only): health, priority, replica counters, on-demand check and
// the rclone config download. Creating/editing channels is done through the API for now.
import { api } from "./api";
import { badge, busy, errorText, fmtTime, h, replace, toast } from "./dom";
import type { Channel, Page, ViewContext } from "./types";

function health(c: Channel): HTMLElement {
  if (c.deleting) return badge("清空中", "warn");
  if (!c.last_checked_at && !c.last_error) return badge("未探测", "muted");
  return c.healthy ? badge("健康", "ok") : badge("异常", "bad");
}

interface Alert {
  id: number;
  kind: string;
  target: string;
  message: string;
  opened_at: string;
}

const ALERT_KINDS: Record<string, string> = {
  channel_unhealthy: "渠道不健康",
  replication_failed: "复制失败",
  channel_quota_exceeded: "渠道用量超限",
  drain_failed: "清空失败",
  backup_failed: "备份失败",
};

/** Open alerts (health, replication, drains) above the channel table. */
function alertList(): HTMLElement {
  const list = h("ul", { class: "stack", id: "alert-list" }, h("li", { class: "muted" }, "加载中…"));
  api<Page<Alert>>("GET", "/api/admin/alerts").then(
    (data) =>
      replace(
        list,
        ...(data.items.length
          ? data.items.map((a) =>
              h("li", { class: "notice" }, badge(ALERT_KINDS[a.kind] ?? a.kind, "bad"), " ", h("strong", null, a.target || "—"), " · ", a.message, h("span", { class: "muted" }, ` · ${fmtTime(a.opened_at)}`)),
            )
          : [h("li", { class: "muted" }, "没有未解除的告警")]),
      ),
    (err) => replace(list, h("li", { class: "error" }, `告警加载失败：${errorText(err)}`)),
  );
  return list;
}

export function channelsView(_ctx: ViewContext): HTMLElement {
  const tbody = h("tbody");

  const row = (c: Channel): HTMLElement => {
    const check = h("button", { type: "button", class: "small" }, "检查");
    check.addEventListener("click", () =>
      void busy(check, async () => {
        check.textContent = "检查中…";
        try {
          const updated = await api<Channel>("POST", `/api/admin/channels/${c.id}/check`);
          toast(updated.healthy ? `${updated.name}：探测成功` : `${updated.name}：${updated.last_error || "探测失败"}`, updated.healthy ? "ok" : "error");
          tr.replaceWith(row(updated));
        } finally {
          check.textContent = "检查";
        }
      }),
    );
    const download = h("a", { class: "button small", href: `/api/admin/channels/${c.id}/rclone-config`, download: `kura-${c.id}.conf`, title: "文件与主密钥同等敏感，请妥善保管" }, "rclone 配置");
    const tr = h(
      "tr",
      { dataset: { id: String(c.id) } },
      h("td", null, h("strong", null, c.name), h("div", { class: "muted" }, `#${c.id} · ${c.driver}`)),
      h("td", null, c.priority),
      h("td", null, health(c)),
      h("td", null, c.encrypted ? "加密" : "—", c.allow_direct_link ? h("div", { class: "muted" }, "允许直链") : null),
      h(
        "td",
        { class: "counters" },
        h("span", { class: "ok-text", title: "已完成" }, `✓ ${c.replicas.done}`),
        h("span", { class: "warn-text", title: "等待复制" }, `… ${c.replicas.pending}`),
        h("span", { class: c.replicas.failed ? "bad-text" : "muted", title: "失败" }, `✗ ${c.replicas.failed}`),
      ),
      h("td", null, fmtTime(c.last_checked_at, "从未")),
      h("td", { class: "wrap" }, c.last_error || "—"),
      h("td", { class: "row-actions" }, check, download),
    );
    return tr;
  };

  async function load(): Promise<void> {
    try {
      const data = await api<Page<Channel>>("GET", "/api/admin/channels");
      replace(tbody, ...(data.items.length ? data.items.map(row) : [h("tr", null, h("td", { colSpan: 8, class: "empty" }, "没有存储渠道"))]));
    } catch (err) {
      replace(tbody, h("tr", null, h("td", { colSpan: 8, class: "error" }, `加载失败：${errorText(err)}`)));
    }
  }

  void load();
  return h(
    "section",
    { class: "view" },
    h("div", { class: "toolbar" }, h("h1", null, "存储渠道"), h("button", { type: "button", onclick: () => void load() }, "刷新")),
    h("p", { class: "muted" }, "新图片同步写入优先级最高的健康渠道，再由后台复制到其他渠道。rclone 配置文件含完整凭据，与主密钥同等敏感。"),
    h("h2", null, "告警"),
    alertList(),
    h("h2", null, "渠道"),
    h(
      "table",
      { class: "table", id: "channel-table" },
      h("thead", null, h("tr", null, ...["渠道", "优先级", "状态", "加密", "副本", "最近探测", "最近错误", ""].map((t) => h("th", null, t)))),
      tbody,
    ),
  );
}
