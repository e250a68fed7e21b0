/**
 * Metadata backups (spec 2.10, 3.8, 4.11, 6.2): SQLite snapshots written to every
 * healthy channel under `_kura/backups/`, listed and fetched back with failover,
 * and a staged restore that is swapped in at the next start.
 */
import { recordBackupSuccess } from "./ops-metrics";
import { resetChannelBindingTimes } from "../channels/repo";
import type { Database } from "bun:sqlite";
import { existsSync, renameSync, rmSync } from "node:fs";
import { rm } from "node:fs/promises";
import { dirname, join } from "node:path";
import type { Driver, GetResult } from "../channels/driver";
import type { LoadedChannel } from "../channels/registry";
import type { AppContext } from "../context";
import { sqlTime } from "../db/time";
import { fsyncPathSync, renameDurably } from "../shared/durable-file";
import { getOrCreate } from "../shared/get-or-create";
import { openAlert, resolveAlert } from "./alerts";
import { backupWasInterrupted, markBackupEnded, markBackupStarted } from "./backup-marker";
import { vacuumIntoInWorker } from "./snapshot-worker";
import type { Logger } from "./log";
import { Invalid, isDiskFull } from "../errors";
import { isSqliteDamage } from "../db/damage";
import { snapshotProblem } from "./snapshot-check";
import { pruneBeforeRestoreCopies } from "./restore-copies";
import { deleteAllSessions } from "../auth/repo";

export const BACKUP_PREFIX = "_kura/backups/";
export const SNAPSHOT_NAME = /^kura-(\d{4})(\d{2})(\d{2})-(\d{2})(\d{2})(\d{2})\.(\d{3})\.db$/;
const STAGED_FILE = "restore.staged.db";

export interface SnapshotItem {
  name: string;
  size: number;
  taken_at: string;
  channels: string[];
}

type WritableChannel = LoadedChannel & { driver: Driver };

export class BackupFailedError extends Error {
  /** The data dir's disk is full: answered like every full disk (503 with Retry-After). */
  constructor(
    message: string,
    readonly diskFull = false,
  ) {
    super(message);
  }
}

/** `kura-YYYYMMDD-HHMMSS.mmm.db` for a moment in UTC. */
export function snapshotName(date: Date): string {
  const iso = date.toISOString(); // YYYY-MM-DDTHH:MM:SS.mmmZ
  return `kura-${iso.slice(0, 10).replaceAll("-", "")}-${iso.slice(11, 19).replaceAll(":", "")}.${iso.slice(20, 23)}.db`;
}

/** RFC 3339 with milliseconds, read back from the name (the name is the only timestamp a channel keeps reliably). */
export function takenAt(name: string): string {
  const m = SNAPSHOT_NAME.exec(name)!;
  return `${m[1]}-${m[2]}-${m[3]}T${m[4]}:${m[5]}:${m[6]}.${m[7]}Z`;
}

export const stagedPath = (dataDir: string) => join(dataDir, STAGED_FILE);
/** Where a staging is written before its rename to stagedPath (console and CLI alike); the start removes a leftover. */
export const stagingPartialPath = (dataDir: string) => `${stagedPath(dataDir)}.partial`;

/** Snapshot names on one channel with their sizes. */
async function listOn(channel: WritableChannel): Promise<Map<string, number>> {
  const found = new Map<string, number>();
  for await (const obj of channel.driver.list(BACKUP_PREFIX)) {
    const name = obj.key.slice(BACKUP_PREFIX.length);
    if (SNAPSHOT_NAME.test(name)) found.set(name, obj.size);
  }
  return found;
}

/** Deletes the oldest snapshots beyond `keep` on one channel. */
async function prune(channel: WritableChannel, keep: number) {
  const names = [...(await listOn(channel)).keys()].sort().reverse();
  for (const name of names.slice(keep)) await channel.driver.delete(BACKUP_PREFIX + name);
}

/** Opens backup_failed and logs the failed round (spec 6.2, 6.3). */
function reportFailure(app: AppContext, message: string) {
  openAlert(app, "backup_failed", "", message);
  app.log.error("元数据备份失败", { err: message });
}

function fail(app: AppContext, message: string, diskFull = false): never {
  reportFailure(app, message);
  throw new BackupFailedError(message, diskFull);
}

/**
 * The snapshot could not be taken: a full disk says so; anything else is logged, not echoed (SQLite's English).
 * `VACUUM INTO` reads every row of every table, so the round is also where damage in pages the service
 * itself has not read since it started shows up: that gets the advice to check and restore, not "see the log".
 */
function snapshotFailed(app: AppContext, err: unknown): never {
  if (isDiskFull(err)) fail(app, "生成数据库快照失败：磁盘空间不足", true);
  if (isSqliteDamage(err)) {
    app.log.error("生成数据库快照时发现数据库文件已损坏", { err: (err as Error).message });
    fail(app, "生成数据库快照失败：数据库文件已损坏。已有的快照不会被清理；请停止服务，运行 kura check 确认，并用 kura restore 从最近的快照恢复");
  }
  app.log.error("生成数据库快照失败", { err: (err as Error).message });
  fail(app, "生成数据库快照失败（详见服务日志）");
}

/**
 * At start: backup_failed is about the most recent backup of the current process (spec 6.2),
 * and this process has taken none yet, so an alert left open by the previous run resolves.
 */
export function resolveBackupAlertAtStart(app: Pick<AppContext, "db" | "log" | "settings">) {
  resolveAlert(app, "backup_failed", "");
}

/** Per context: the snapshot being taken, and the one that will follow it. */
interface SnapshotRounds {
  running?: Promise<SnapshotItem>;
  next?: Promise<SnapshotItem>;
}
const rounds = new WeakMap<AppContext, SnapshotRounds>();

/**
 * Takes one snapshot and writes it to every healthy, non-deleting channel (see
 * `snapshotOnce`). Snapshots never overlap: two `VACUUM INTO`s of a large database would
 * double the disk load, and the first to end would remove the in-progress marker the other
 * still needs. A request while one runs gets the next snapshot, taken once it has ended
 * (so it holds everything written before the request), shared by everyone who asked
 * meanwhile.
 */
export function takeSnapshot(app: AppContext): Promise<SnapshotItem> {
  const state = getOrCreate(rounds, app, (): SnapshotRounds => ({}));
  const start = () => {
    const run = snapshotOnce(app).finally(() => {
      if (state.running === run) state.running = undefined;
    });
    state.running = run;
    return run;
  };
  if (!state.running) return start();
  state.next ??= state.running
    .catch(() => {})
    .then(() => {
      state.next = undefined;
      return start();
    });
  return state.next;
}

/**
 * Takes one snapshot and writes it to every healthy, non-deleting channel, pruning
 * each to `backup_keep`. Channels that were written keep the snapshot even when
 * others fail; any failure opens backup_failed, a full success resolves it. Throws
 * only when no channel was written; a partial failure returns the item with the
 * channels that hold it (spec 4.11).
 */
async function snapshotOnce(app: AppContext): Promise<SnapshotItem> {
  const targets = app.channels.writable();
  if (!targets.length) fail(app, "没有健康的存储渠道，未能写入元数据备份");
  const now = new Date();
  const name = snapshotName(now);
  const file = join(app.paths.tmp, name);
  try {
    try {
      // Inside the try: on a full disk even the marker cannot be written, and that failure is the
      // backup's (alert, log, no marker left behind), not an unexplained error.
      markBackupStarted(app.bootstrap.dataDir, name);
      // In a worker on its own connection: the loop keeps serving while a large database is copied.
      await vacuumIntoInWorker(app.db.filename, file);
    } catch (err) {
      snapshotFailed(app, err);
    }
    const size = Bun.file(file).size;
    const written: string[] = [];
    const failures: string[] = [];
    const keep = app.settings.get().backup_keep;
    for (const channel of targets) {
      const key = BACKUP_PREFIX + name;
      try {
        await app.channels.put(channel, key, Bun.file(file).stream(), size);
        written.push(channel.row.name);
        app.log.info("元数据快照已写入存储渠道", { channel: channel.row.name, key, bytes: size });
      } catch (err) {
        failures.push(`${channel.row.name}（${(err as Error).message}）`);
        continue;
      }
      // A failed prune leaves extra snapshots behind, which is not a failed backup.
      await prune(channel, keep).catch((err) => app.log.warn("清理旧快照失败", { channel: channel.row.name, err: (err as Error).message }));
    }
    if (written.length) recordBackupSuccess(app, now);
    if (failures.length) {
      const message = `元数据备份未能写入以下存储渠道：${failures.join("；")}`;
      if (!written.length) fail(app, message);
      reportFailure(app, message);
    } else resolveAlert(app, "backup_failed", "");
    return { name, size, taken_at: takenAt(name), channels: written };
  } finally {
    // Unlinking a snapshot of a large database frees many extents: not on the event loop.
    await rm(file, { force: true }).catch(() => {});
    markBackupEnded(app.bootstrap.dataDir);
  }
}

/** At start: a backup the previous process did not finish (it crashed mid-way) is taken now. */
export async function resumeInterruptedBackup(app: AppContext): Promise<void> {
  if (!backupWasInterrupted(app.bootstrap.dataDir)) return;
  app.log.info("上次元数据备份未完成（进程中断），现在重新备份");
  await backupRound(app);
}

/** One round of the scheduled backup loop; failures are already alerted and logged. */
export async function backupRound(app: AppContext): Promise<void> {
  await takeSnapshot(app).catch((err) => {
    if (!(err instanceof BackupFailedError)) throw err;
  });
}

/** Union of snapshots over healthy, non-deleting channels, newest first, holders by priority. */
export async function listSnapshots(app: AppContext): Promise<SnapshotItem[]> {
  const byName = new Map<string, SnapshotItem>();
  for (const channel of app.channels.writable()) {
    let found: Map<string, number>;
    try {
      found = await listOn(channel);
    } catch (err) {
      app.log.warn("列出存储渠道上的快照失败", { channel: channel.row.name, err: (err as Error).message });
      continue;
    }
    for (const [name, size] of found) {
      const item = byName.get(name) ?? { name, size, taken_at: takenAt(name), channels: [] };
      item.channels.push(channel.row.name);
      byName.set(name, item);
    }
  }
  return [...byName.values()].sort((a, b) => (a.name < b.name ? 1 : a.name > b.name ? -1 : 0));
}

/** Opens a snapshot from its holders in priority order, moving on at a read failure; undefined when none has it. */
export async function openSnapshot(app: AppContext, name: string): Promise<GetResult | undefined> {
  if (!SNAPSHOT_NAME.test(name)) return undefined;
  for (const channel of app.channels.writable()) {
    try {
      if (!(await channel.driver.head(BACKUP_PREFIX + name))) continue;
      return await channel.driver.get(BACKUP_PREFIX + name);
    } catch (err) {
      app.log.warn("从存储渠道读取快照失败，切换到下一个", { channel: channel.row.name, err: (err as Error).message });
    }
  }
  return undefined;
}

/**
 * At start: a staging cut short by a kill (its own cleanup never ran) leaves `<staged>.partial`,
 * as large as the database, which nothing would ever read or remove.
 */
export function removeStagingLeftover(dataDir: string): void {
  rmSync(stagingPartialPath(dataDir), { force: true });
}

/** Downloads the snapshot into the staging file; false when no healthy channel has it. */
export async function stageSnapshot(app: AppContext, name: string): Promise<boolean> {
  const opened = await openSnapshot(app, name);
  if (!opened) return false;
  const target = stagedPath(app.bootstrap.dataDir);
  const partial = stagingPartialPath(app.bootstrap.dataDir);
  try {
    await Bun.write(partial, new Response(opened.stream));
    // Cheap checks only (no page-by-page read inside a request): the start checks the whole file
    // again before it swaps it in, and keeps the live database if it fails then.
    const problem = snapshotProblem(partial, { keyFingerprint: app.key.fingerprint, integrity: false });
    if (problem) throw new Invalid(`快照 ${name} 无法恢复：${problem}`);
    // The answer says "staged" and the service stops: a crash after it must still find the file.
    renameDurably(partial, target);
  } finally {
    rmSync(partial, { force: true });
  }
  return true;
}

/** The current time for file names: `20260102-030405.678`. */
export const fileStamp = () => new Date().toISOString().replace(/[-:]/g, "").replace("T", "-").replace("Z", "");

/**
 * At start, before anything reads the database: swaps a staged snapshot in and keeps
 * the previous database (with its WAL files) next to it, with at most the two copies that
 * earlier restores kept (restore-copies.ts). Returns true when swapped.
 */
export function swapInStagedSnapshot(dataDir: string, dbPath: string, log: Logger): boolean {
  const staged = stagedPath(dataDir);
  if (!existsSync(staged)) return false;
  const kept = `${dbPath}.before-restore-${fileStamp()}`;
  const hadDatabase = existsSync(dbPath);
  if (hadDatabase) renameSync(dbPath, kept);
  for (const suffix of ["-wal", "-shm"]) {
    if (existsSync(dbPath + suffix)) renameSync(dbPath + suffix, kept + suffix);
  }
  renameSync(staged, dbPath);
  // The names, before SQLite writes to the swapped-in file: a crash must not bring the old one back
  // under kura.db beside a WAL begun for the new one.
  fsyncPathSync(dirname(dbPath));
  log.info("已换入快照，原数据库已保留", { previous: kept });
  // Repeated restores would otherwise fill the data disk with whole copies of the database.
  if (hadDatabase) pruneBeforeRestoreCopies(dbPath, kept, log);
  return true;
}

/**
 * After a swap: the snapshot's sessions are ended. They include every session that was logged out
 * or ended by a password change after the snapshot was taken (those happen in the database the
 * swap just set aside), and a restore must not bring them back; everyone logs in again.
 */
export function endRestoredSessions(db: Database, log: Logger): void {
  const ended = deleteAllSessions(db);
  log.info("已结束快照中的全部会话，请重新登录", { sessions: ended });
}

/** After a swap: objects written after the snapshot must not count as foreign, so every binding starts now. */
export function resetChannelBindings(db: Database, log: Logger): void {
  const changed = resetChannelBindingTimes(db, sqlTime());
  log.info("已重置存储渠道绑定时间", { channels: changed });
}
