// #channels (admins): list with health, priority, usage and replica counts; create from a
// template, edit, check, rclone-config download and delete (with or without purge).
import { api, ApiError } from "./api";
import { openChannelForm } from "./channel-form";
import { badge, busy, errorText, fmtBytes, fmtTime, h, openModal, replace, toast } from "./dom";
import { downloadLink } from "./download-link";
import { TEMPLATE_NAMES } from "./labels";
import type { AdminDashboard, Channel, ChannelConfigView, ChannelTemplate, Page, ViewContext } from "./types";
import { dataTable, messageRow } from "./ui";

function health(c: Channel): HTMLElement {
  if (c.deleting) return badge("清空中", "warn");
  if (!c.last_checked_at && !c.last_error) return badge("未探测", "muted");
  return c.healthy ? badge("健康", "ok") : badge("异常", "bad");
}

/** Why a delete answered 409, in words a person can act on. */
function conflictHelp(message: string): string {
  return `${message}。渠道持有某些图片的唯一副本时不能删除：先添加另一个渠道并等待复制完成（副本计数中“等待”归零），或先删除这些图片；正在清空的渠道也不能再次删除。`;
}

function confirmDelete(c: Channel, done: () => void): void {
  const error = h("p", { class: "error", role: "alert", id: "delete-error" });
  const purge = h("button", { type: "button", class: "danger", id: "delete-purge" }, "删除并清空远端对象");
  const keep = h("button", { type: "button", id: "delete-keep" }, "仅移除，保留远端文件");
  const run = (button: HTMLButtonElement, withPurge: boolean) =>
    void busy(button, async () => {
      error.textContent = "";
      try {
        await api("DELETE", `/api/admin/channels/${c.id}?purge=${withPurge}`);
      } catch (err) {
        error.textContent = err instanceof ApiError && err.status === 409 ? conflictHelp(err.message) : errorText(err);
        return;
      }
      modal.close();
      toast(withPurge ? `已开始清空 ${c.name}，完成后渠道消失` : `已移除 ${c.name}`);
      done();
    });
  purge.addEventListener("click", () => run(purge, true));
  keep.addEventListener("click", () => run(keep, false));
  const modal = openModal(
    `删除渠道 · ${c.name}`,
    h(
      "ul",
      { class: "plain" },
      h("li", null, h("strong", null, "删除并清空："), "渠道立即停止接收写入，后台删除本服务写入的图片对象和快照，清空后渠道消失。"),
      h("li", null, h("strong", null, "仅移除："), "立即从 Kura 中移除，远端对象和快照原样保留。"),
      h("li", { class: "muted" }, "渠道持有任一图片的唯一副本时会被拒绝（409）。"),
    ),
    error,
    h("div", { class: "actions" }, purge, keep),
  );
  modal.dialog.id = "delete-dialog";
}

export function channelsView(ctx: ViewContext): HTMLElement {
  const { table, tbody } = dataTable("channel-table", ["渠道", "优先级", "状态", "加密 / 直链", "已存", "副本（完成/等待/失败）", "最近探测", "最近错误", ""]);
  let templates: ChannelTemplate[] = [];

  const row = (c: Channel, bytes: number): HTMLElement => {
    const check = h("button", { type: "button", class: "small", dataset: { action: "check" } }, "检查");
    check.addEventListener(
      "click",
      () =>
        void busy(check, async () => {
          check.textContent = "检查中…";
          try {
            const updated = await api<Channel>("POST", `/api/admin/channels/${c.id}/check`);
            toast(updated.healthy ? `${updated.name}：探测成功` : `${updated.name}：${updated.last_error || "探测失败"}`, updated.healthy ? "ok" : "error");
            tr.replaceWith(row(updated, bytes));
            ctx.refreshAlerts();
          } finally {
            check.textContent = "检查";
          }
        }),
    );
    const edit = h("button", { type: "button", class: "small", dataset: { action: "edit" }, disabled: c.deleting }, "编辑");
    edit.addEventListener(
      "click",
      () =>
        void busy(edit, async () => {
          const view = await api<ChannelConfigView>("GET", `/api/admin/channels/${c.id}/config`);
          openChannelForm({ ctx, templates, existing: { channel: c, view }, saved: () => void load() });
        }),
    );
    const del = h("button", { type: "button", class: "small danger", dataset: { action: "delete" }, disabled: c.deleting }, "删除");
    del.addEventListener("click", () => confirmDelete(c, () => void load()));
    const download = downloadLink("rclone 配置", `/api/admin/channels/${c.id}/rclone-config`, `kura-${c.id}.conf`, {
      class: "small",
      title: "文件含完整凭据，与主密钥同等敏感",
      dataset: { action: "rclone-config" },
    });
    const tr = h(
      "tr",
      { dataset: { id: String(c.id), name: c.name } },
      h("td", null, h("strong", null, c.name), h("div", { class: "muted" }, `#${c.id} · ${c.driver}`)),
      h("td", null, c.priority),
      h("td", null, health(c)),
      h("td", null, c.encrypted ? "加密" : "不加密", " / ", c.allow_direct_link ? "直链" : "代理"),
      h("td", null, fmtBytes(bytes)),
      h(
        "td",
        { class: "counters" },
        h("span", { class: "ok-text", title: "已完成" }, `✓ ${c.replicas.done}`),
        h("span", { class: "warn-text", title: "等待复制" }, `… ${c.replicas.pending}`),
        h("span", { class: c.replicas.failed ? "bad-text" : "muted", title: "失败" }, `✗ ${c.replicas.failed}`),
      ),
      h("td", null, fmtTime(c.last_checked_at, "从未")),
      h("td", { class: "wrap" }, c.last_error || "—"),
      h("td", { class: "row-actions" }, edit, check, download, del),
    );
    return tr;
  };

  async function load(): Promise<void> {
    try {
      const [data, dash, tpl] = await Promise.all([
        api<Page<Channel>>("GET", "/api/admin/channels"),
        api<AdminDashboard>("GET", "/api/admin/dashboard"),
        templates.length ? Promise.resolve({ items: templates, total: templates.length }) : api<Page<ChannelTemplate>>("GET", "/api/admin/channel-templates"),
      ]);
      templates = tpl.items;
      const bytes = new Map(dash.channels.map((c) => [c.id, c.bytes]));
      replace(tbody, ...(data.items.length ? data.items.map((c) => row(c, bytes.get(c.id) ?? 0)) : [messageRow(9, "没有存储渠道")]));
    } catch (err) {
      replace(tbody, messageRow(9, `加载失败：${errorText(err)}`, "error"));
    }
  }

  const create = h("button", { type: "button", class: "primary", id: "channel-new" }, "新建渠道");
  create.addEventListener(
    "click",
    () =>
      void busy(create, async () => {
        if (!templates.length) templates = (await api<Page<ChannelTemplate>>("GET", "/api/admin/channel-templates")).items;
        openChannelForm({ ctx, templates, saved: () => void load() });
      }),
  );

  void load();
  return h(
    "section",
    { class: "view" },
    h("div", { class: "toolbar" }, h("h1", null, "存储渠道"), create, h("button", { type: "button", onclick: () => void load() }, "刷新")),
    h(
      "p",
      { class: "muted" },
      `新图片同步写入优先级最高的健康渠道，再由后台复制到其他渠道。支持的模板：${Object.values(TEMPLATE_NAMES).join("、")}。rclone 配置文件含完整凭据，与主密钥同等敏感。`,
    ),
    table,
  );
}
