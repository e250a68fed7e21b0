/**
 * Copies of the database kept next to it, each as large as the database, so that repeated
 * restores or upgrades do not fill the data disk: only the newest few of each kind are kept.
 * - `kura.db.before-restore-<time>` (with its -wal/-shm, see swapInStagedSnapshot): each restore
 *   sets the previous database aside.
 * - `kura.db.before-migration-v<N>-<time>` (see datadir/pre-migration.ts): each upgrade.
 */
import { readdirSync, rmSync } from "node:fs";
import { basename, dirname, join } from "node:path";
import type { Logger } from "./log";

/** Copies kept after a restore, the one it just wrote among them. */
export const BEFORE_RESTORE_KEEP = 3;
/** Copies kept after an upgrade, the one it just wrote among them. */
export const BEFORE_MIGRATION_KEEP = 3;

export type CopyKind = "before-restore" | "before-migration";

const literal = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");

/**
 * `<db>.before-restore-20260102-030405.678` or `<db>.before-migration-v7-20260102-030405.678`,
 * optionally with `-wal` or `-shm`: group 1 is the set's name, group 2 its UTC time.
 */
export const copyPattern = (dbName: string, kind: CopyKind) =>
  new RegExp(`^(${literal(dbName)}\\.${kind}-${kind === "before-migration" ? "v\\d+-" : ""}(\\d{8}-\\d{6}\\.\\d{3}))(-wal|-shm)?$`);

const MESSAGES: Record<CopyKind, { removed: string; failed: string }> = {
  "before-restore": { removed: "已删除较早的恢复前数据库副本", failed: "删除恢复前数据库副本失败" },
  "before-migration": { removed: "已删除较早的迁移前数据库副本", failed: "删除迁移前数据库副本失败" },
};

/**
 * Removes every set of `kind` but the newest `keep` (by the UTC time in the name), each set whole
 * (the database and its -wal/-shm). `justWritten` is never removed, even when a clock set back
 * made its name sort first. Returns the names of the removed sets.
 */
export function pruneDatabaseCopies(dbPath: string, kind: CopyKind, justWritten: string, log: Logger, keep: number): string[] {
  const dir = dirname(dbPath);
  const pattern = copyPattern(basename(dbPath), kind);
  const files = readdirSync(dir);
  const sets = new Map<string, string>();
  for (const f of files) {
    const m = pattern.exec(f);
    if (m) sets.set(m[1]!, m[2]!);
  }
  const newestFirst = [...sets.keys()].sort((a, b) => (sets.get(a)! < sets.get(b)! ? 1 : sets.get(a)! > sets.get(b)! ? -1 : 0));
  const current = basename(justWritten);
  const kept = [current, ...newestFirst.filter((s) => s !== current)].slice(0, Math.max(1, keep));
  const removed = newestFirst.filter((s) => !kept.includes(s));
  const failures: string[] = [];
  for (const set of removed) {
    for (const f of files) {
      if (pattern.exec(f)?.[1] !== set) continue;
      try {
        rmSync(join(dir, f), { force: true });
      } catch (err) {
        failures.push(`${f}: ${(err as Error).message}`);
      }
    }
  }
  if (removed.length) log.info(MESSAGES[kind].removed, { removed: removed.join(","), kept: kept.length });
  if (failures.length) log.warn(MESSAGES[kind].failed, { err: failures.join("; ") });
  return removed;
}

/** The restore's pruning: pruneDatabaseCopies of `before-restore` sets. */
export function pruneBeforeRestoreCopies(dbPath: string, justWritten: string, log: Logger, keep = BEFORE_RESTORE_KEEP): string[] {
  return pruneDatabaseCopies(dbPath, "before-restore", justWritten, log, keep);
}
