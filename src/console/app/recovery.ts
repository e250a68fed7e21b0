// #backups' "灾难恢复" section: what must be kept off the machine and how a new machine gets the
// data back (README "Backup and disaster recovery", in short). Without it the page offered
// snapshot downloads and said nothing of the master key, without which no snapshot restores
// (audit 15 MED-3).
import { h } from "./dom";

/** `dataDir` is the server's data directory (config/full bootstrap), so the key's path is the real one. */
export function recoverySection(dataDir: string | null): HTMLElement {
  const dir = dataDir ? dataDir.replace(/\/+$/, "") : "<数据目录>";
  const keyPath = `${dir}/master.key`;
  return h(
    "section",
    { id: "recovery" },
    h("h2", null, "灾难恢复"),
    h(
      "p",
      { class: "notice warn", id: "recovery-key" },
      h("strong", null, "快照离不开主密钥。"),
      "渠道凭据和加密渠道的数据都由主密钥加密，快照只能用拍摄它时的主密钥恢复。请把主密钥（",
      h("code", null, keyPath),
      "，或环境变量 KURA_MASTER_KEY 的值）与快照分开、离线保存。",
    ),
    h(
      "p",
      { class: "muted" },
      "同样要保存在本机之外的：每个渠道的 rclone 配置（存储渠道页下载，没有 Kura 也能用 rclone 读出对象），以及至少一个不在本机磁盘上的渠道（快照写入每个健康渠道的 _kura/backups/）。下载的快照与数据库同等敏感。",
    ),
    h("h3", null, "换机器恢复"),
    h(
      "ol",
      { id: "recovery-steps" },
      h("li", null, "安装 Kura（程序、服务用户和 systemd 单元），先不要启动。"),
      h("li", null, "放回主密钥：把 master.key 放进数据目录（权限 0600，属主为服务用户），或设置 KURA_MASTER_KEY。"),
      h("li", null, "取得最新快照：本页下载，或用保存的 rclone 配置从渠道的 _kura/backups/ 复制。"),
      h("li", null, "以服务用户执行 ", h("code", null, "kura restore <快照文件>"), "：检查快照完整、与主密钥匹配后暂存，不匹配则不做任何改动。"),
      h("li", null, "启动服务：启动时换入快照，所有会话失效，需要重新登录；快照之后修改的密码和吊销的令牌会回到快照时的状态，请重新处理。"),
    ),
    h("p", { class: "muted" }, "同一台机器上恢复可直接用上面快照列表的“恢复…”。详见 README 的 Backup and disaster recovery 一节。"),
  );
}
