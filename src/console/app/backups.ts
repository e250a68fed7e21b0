// #backups (admins): metadata snapshots on the channels (list, take now, download, restore at
// the next start), the per-channel view, the last result, and the metadata export download.
import { api } from "./api";
import { badge, busy, errorText, fmtBytes, h, openModal, replace, toast } from "./dom";
import { downloadLink } from "./download-link";
import { recoverySection } from "./recovery";
import type { Alert, BackupSnapshot, FullConfig, Page, ViewContext } from "./types";
import { dataTable, messageRow } from "./ui";

function takenAt(s: BackupSnapshot): string {
  const d = new Date(s.taken_at);
  return Number.isNaN(d.getTime()) ? s.taken_at : d.toLocaleString("zh-CN", { hour12: false });
}

function restoreDialog(s: BackupSnapshot): void {
  const error = h("p", { class: "error", role: "alert" });
  const go = h("button", { type: "button", class: "danger", id: "restore-confirm" }, "暂存快照并关闭服务");
  const modal = openModal(
    `从快照恢复 · ${s.name}`,
    h(
      "ol",
      null,
      h("li", null, "服务器先取回这份快照，暂存到数据目录，然后开始优雅关闭（正在进行的请求会完成）。"),
      h(
        "li",
        null,
        "恢复发生在",
        h("strong", null, "下一次启动"),
        "时：由 systemd 管理时（Restart=always）服务会自动重启并换入快照；手动运行时请自行再次启动。",
      ),
      h("li", null, "原数据库改名保留在数据目录中，不会被删除；快照之后上传的图片记录将不在恢复后的数据库里。"),
    ),
    error,
    h("div", { class: "actions" }, go),
  );
  go.addEventListener(
    "click",
    () =>
      void busy(
        go,
        async () => {
          const r = await api<{ message: string }>("POST", `/api/admin/backups/${encodeURIComponent(s.name)}/restore`);
          modal.close();
          toast(r.message || "快照已暂存，服务正在关闭");
        },
        (msg) => (error.textContent = msg),
      ),
  );
}

export function backupsView(ctx: ViewContext): HTMLElement {
  const { table, tbody } = dataTable("backup-table", ["快照", "时间", "大小", "所在渠道", ""]);
  const perChannel = h("ul", { class: "plain", id: "backup-channels" });
  const last = h("div", { id: "backup-last" });
  const take = h("button", { type: "button", class: "primary", id: "backup-now" }, "立即备份");

  const row = (s: BackupSnapshot) =>
    h(
      "tr",
      { dataset: { name: s.name } },
      h("td", null, h("code", null, s.name)),
      h("td", null, takenAt(s)),
      h("td", null, fmtBytes(s.size)),
      h("td", { class: "wrap" }, s.channels.join("、") || "—"),
      h(
        "td",
        { class: "row-actions" },
        downloadLink("下载", `/api/admin/backups/${encodeURIComponent(s.name)}`, s.name, { class: "small", dataset: { action: "download" } }),
        h("button", { type: "button", class: "small danger", dataset: { action: "restore" }, onclick: () => restoreDialog(s) }, "恢复…"),
      ),
    );

  async function load(): Promise<void> {
    try {
      const [data, alerts] = await Promise.all([api<Page<BackupSnapshot>>("GET", "/api/admin/backups"), api<Page<Alert>>("GET", "/api/admin/alerts")]);
      replace(tbody, ...(data.items.length ? data.items.map(row) : [messageRow(5, "还没有快照：点“立即备份”生成第一份")]));
      const counts = new Map<string, number>();
      for (const s of data.items) for (const c of s.channels) counts.set(c, (counts.get(c) ?? 0) + 1);
      replace(
        perChannel,
        ...(counts.size
          ? [...counts].map(([c, n]) => h("li", null, h("strong", null, c), `：${n} 份快照`))
          : [h("li", { class: "muted" }, "没有渠道持有快照")]),
      );
      const failed = alerts.items.find((a) => a.kind === "backup_failed");
      const newest = data.items[0];
      replace(
        last,
        failed
          ? h("p", { class: "notice bad" }, badge("备份失败", "bad"), ` ${failed.message}`)
          : newest
            ? h("p", null, badge("正常", "ok"), ` 最近一次：${takenAt(newest)}，写入 ${newest.channels.length} 个渠道`)
            : h("p", { class: "muted" }, "尚未备份"),
      );
    } catch (err) {
      replace(tbody, messageRow(5, `加载失败：${errorText(err)}`, "error"));
    }
  }

  take.addEventListener(
    "click",
    () =>
      void busy(take, async () => {
        const s = await api<BackupSnapshot>("POST", "/api/admin/backups");
        toast(`已生成快照 ${s.name}，写入 ${s.channels.length} 个渠道`);
        await load();
        ctx.refreshAlerts(); // a full backup resolves backup_failed
      }),
  );

  void load();
  // The key's real path comes from the bootstrap settings; a generic one shows until (or unless) they load.
  const recovery = h("div", null, recoverySection(null));
  api<FullConfig>("GET", "/api/admin/config/full").then(
    (full) => replace(recovery, recoverySection(full.bootstrap.data_dir)),
    () => undefined,
  );
  return h(
    "section",
    { class: "view", id: "backups-view" },
    h("div", { class: "toolbar" }, h("h1", null, "备份与恢复"), take, h("button", { type: "button", onclick: () => void load() }, "刷新")),
    h("p", { class: "muted" }, "快照是元数据库（用户、令牌、图片记录、渠道配置）的完整副本，写入每个健康的渠道；图片文件本身靠多渠道复制保护。"),
    h("h2", null, "最近结果"),
    last,
    h("h2", null, "快照"),
    h("div", { class: "table-wrap" }, table),
    h("h2", null, "各渠道持有"),
    perChannel,
    h("h2", null, "导出元数据"),
    h(
      "p",
      null,
      downloadLink("下载 JSON 导出", "/api/admin/export", "kura-export.json", { id: "export-download" }),
      h("span", { class: "muted" }, " 用户、渠道、令牌、图片与副本记录；不含任何凭据和密码哈希。"),
    ),
    recovery,
  );
}
