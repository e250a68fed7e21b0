/**
 * What an operator's Prometheus and Alertmanager need beyond the request counters: Kura's own
 * alerts (the webhook's fixed payload is not Alertmanager's, so /metrics was their only way in and
 * they were not there), when a backup last reached a channel, the build, and the space the data
 * directory has left. All read at scrape time, each from one indexed query or one stat call.
 */
import { statSync, statfsSync } from "node:fs";
import client from "prom-client";
import type { AppContext } from "../context";
import { readMeta, writeMeta } from "../db/meta";
import { BUILD } from "../version";
import { type AlertKind, listOpenAlerts } from "./alerts";
import { scrapeGauge } from "./metrics";

const ALERT_KINDS: readonly AlertKind[] = ["channel_unhealthy", "replication_failed", "channel_quota_exceeded", "drain_failed", "backup_failed"];

/** Meta key: the Unix time (seconds) the last backup reached at least one channel; survives restarts. */
const LAST_BACKUP_KEY = "last_backup_success_at";

/** Records a backup that reached at least one channel (a partial one too: the snapshot exists). */
export function recordBackupSuccess(app: Pick<AppContext, "db">, at: Date): void {
  writeMeta(app.db, LAST_BACKUP_KEY, String(Math.floor(at.getTime() / 1000)));
}

function sizeOf(path: string): number {
  try {
    return statSync(path).size;
  } catch {
    return 0; // no WAL (after a clean checkpoint) is an empty one
  }
}

export function registerOpsMetrics(app: AppContext): void {
  const registry = app.metrics.registry;
  new client.Gauge({
    name: "kura_build_info",
    help: "运行中的 Kura 版本与运行时（值恒为 1）",
    labelNames: ["version", "commit", "runtime"] as const,
    registers: [registry],
  }).set({ version: BUILD.version, commit: BUILD.commit, runtime: `bun ${Bun.version}` }, 1);

  new client.Gauge({
    name: "kura_alerts_open",
    help: "未解决的告警数（按类型；与 GET /api/admin/alerts 相同）",
    labelNames: ["kind"] as const,
    registers: [registry],
    collect() {
      // Every kind, 0 included: an alerting rule on `> 0` then sees the series before its first alert.
      const open = new Map<string, number>(ALERT_KINDS.map((k) => [k, 0]));
      for (const alert of listOpenAlerts(app)) open.set(alert.kind, (open.get(alert.kind) ?? 0) + 1);
      for (const [kind, n] of open) this.set({ kind }, n);
    },
  });

  scrapeGauge(registry, "kura_backup_last_success_timestamp_seconds", "最近一次元数据备份写入至少一个存储渠道的时间（Unix 秒；从未成功为 0）", () =>
    Number(readMeta(app.db, LAST_BACKUP_KEY) ?? 0),
  );
  const dbPath = app.db.filename;
  scrapeGauge(registry, "kura_db_size_bytes", "数据库文件 kura.db 的大小（字节）", () => statSync(dbPath).size);
  scrapeGauge(registry, "kura_db_wal_size_bytes", "数据库预写日志 kura.db-wal 的大小（字节）", () => sizeOf(`${dbPath}-wal`));
  scrapeGauge(registry, "kura_datadir_free_bytes", "数据目录所在文件系统的可用空间（字节，非 root 可用）", () => {
    const fs = statfsSync(app.bootstrap.dataDir);
    return fs.bavail * fs.bsize;
  });
}
