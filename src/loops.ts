import { healthRound, startLoop } from "./channels/health";
import { reconcileRound } from "./channels/reconcile";
import { RECONCILE_INTERVAL_SECONDS } from "./config/settings-schema";
import type { AppContext } from "./context";
import { readMeta, writeMeta } from "./db/meta";
import { queueScanRound, stopRescans } from "./images/dedup";
import { watchDeleteGrace } from "./images/delete";
import { FileNameIndexer } from "./images/file-name-indexer";
import { PHASH_SWEEP_MS, PhashSweep } from "./images/phash-sweep";
import { judgeCold, sweepRound } from "./images/sweep";
import { expireMultipartUploads } from "./s3/multipart-store";
import { evaluateChannelAlerts } from "./ops/alerts";
import { backupRound } from "./ops/backups";
import { deliverAlertWebhooks } from "./ops/webhook";
import { markAt } from "./testing/hold-points";

type SecondsSetting = "health_check_seconds" | "activity_flush_seconds" | "cleanup_sweep_seconds" | "dedup_scan_seconds";

/**
 * The periodic work of a running server. Each loop re-reads its interval setting every
 * round, and a change of that setting reschedules it at once.
 */
export function startBackgroundLoops(app: AppContext) {
  const rounds: Record<SecondsSetting, () => Promise<void>> = {
    // Alerts are evaluated right after each health round (spec 6.2: same interval);
    // pending webhook deliveries are (re)tried once per evaluation round (spec 6.1).
    health_check_seconds: () => {
      markAt("health.round", "phase=begin");
      return healthRound(app)
        .then(() => evaluateChannelAlerts(app))
        .then(() => deliverAlertWebhooks(app))
        .finally(() => markAt("health.round", "phase=end"));
    },
    activity_flush_seconds: async () => app.access.flush(),
    // S3 multipart uploads past their lifetime go with the same round (their parts are temp files).
    cleanup_sweep_seconds: async () => {
      await sweepRound(app);
      await expireMultipartUploads(app);
    },
    dedup_scan_seconds: async () => void (await queueScanRound(app)),
  };
  const loops = (Object.keys(rounds) as SecondsSetting[]).map((key) => ({
    key,
    loop: startLoop(key, app, () => app.settings.get()[key] * 1000, rounds[key]),
  }));
  // Waits beyond setTimeout's ~24.8 days are chained by startLoop's timer (jobs/long-timeout).
  const backupMs = () => app.settings.get().backup_interval_hours * 3_600_000;
  const backup = startSlowLoop(app, "backup_interval_hours", "backup", backupMs, () => backupRound(app));
  app.settings.onChange((changed) => {
    for (const { key, loop } of loops) if (changed.includes(key)) loop.reschedule();
    if (changed.includes("backup_interval_hours")) backup.reschedule();
    // A new cold threshold re-judges the cleanup list now, not at the next sweep.
    if (changed.includes("cold_cleanup_days")) void judgeCold(app).catch((err) => app.log.error("清理列表重新判定失败", { err: (err as Error).message }));
  });
  // A raised similarity distance rescans the blobs already indexed now, not at the next round (dedup.ts).
  app.settings.onChange((changed) => {
    if (changed.includes("dedup_phash_max_distance"))
      void queueScanRound(app).catch((err) => app.log.error("相似图片重新扫描失败", { err: (err as Error).message }));
  });
  // A new delete grace re-times the physical deletes already waiting (delete.ts).
  watchDeleteGrace(app);
  const phash = new PhashSweep();
  const hashing = startLoop(
    "phash",
    app,
    () => PHASH_SWEEP_MS,
    async () => void (await phash.round(app)),
  );
  const fileNames = new FileNameIndexer();
  const searchIndex = startLoop(
    "file-name-index",
    app,
    () => fileNames.delayMs(),
    async () => void fileNames.round(app),
  );
  // Reconciliation lists whole channels: a day after the last round, not at boot.
  const reconcile = startSlowLoop(
    app,
    "reconcile",
    "reconcile",
    () => RECONCILE_INTERVAL_SECONDS * 1000,
    () => reconcileRound(app),
  );
  // Stopped alongside the loops: a rescan after a raised distance can take long on a large library.
  const rescans = { stop: async () => stopRescans(app) };
  return [...loops.map((l) => l.loop), hashing, searchIndex, reconcile, backup, rescans];
}

/**
 * A daily-or-slower loop (`name` for its log lines, `record` for its last round in `meta`): no
 * round at start, the first one when what is left of its interval since the last round is up.
 */
function startSlowLoop(app: AppContext, name: string, record: string, intervalMs: () => number, round: () => Promise<void>) {
  return startLoop(name, app, intervalMs, recorded(app, record, round), { runAtStart: false, firstDelayMs: remainingMs(app, record, intervalMs()) });
}

/** A round of a daily-or-slower loop never comes sooner than this after a start. */
export const SLOW_LOOP_START_DELAY_MS = 5 * 60_000;

const lastRoundKey = (loop: string) => `loop_last_round:${loop}`;

/**
 * The wait before the first round of a slow loop: what is left of its interval since its last
 * round (kept in `meta`), at least SLOW_LOOP_START_DELAY_MS. Counted from each start, a server
 * restarted more often than the interval (a crash loop, daily deploys) never reconciled or backed
 * up. The very first start counts as a round, so a new installation waits a whole interval.
 */
export function remainingMs(app: Pick<AppContext, "db">, loop: string, intervalMs: number, now = Date.now()): number {
  const last = Number(readMeta(app.db, lastRoundKey(loop)));
  if (!Number.isFinite(last) || last <= 0) {
    writeMeta(app.db, lastRoundKey(loop), String(now));
    return intervalMs;
  }
  // A clock set back since the last round never makes the wait longer than one interval.
  return Math.max(SLOW_LOOP_START_DELAY_MS, Math.min(intervalMs, last + intervalMs - now));
}

/** `round`, then its time written down, failed or not (a failing round is retried at its interval, not at each start). */
export function recorded(app: Pick<AppContext, "db">, loop: string, round: () => Promise<void>): () => Promise<void> {
  return () => round().finally(() => writeMeta(app.db, lastRoundKey(loop), String(Date.now())));
}
