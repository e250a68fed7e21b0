/**
 * Each restore sets the previous database aside as `kura.db.before-restore-<time>` (with its
 * -wal/-shm, see swapInStagedSnapshot). Each copy is as large as the database, so repeated
 * restores would fill the data disk: only the newest few are kept.
 */
import { readdirSync, rmSync } from "node:fs";
import { basename, dirname, join } from "node:path";
import type { Logger } from "./log";

/** Copies kept after a restore, the one it just wrote among them. */
export const BEFORE_RESTORE_KEEP = 3;

/** `<db>.before-restore-20260102-030405.678`, optionally with `-wal` or `-shm`: group 1 is the set's name. */
const copyPattern = (dbName: string) => new RegExp(`^(${dbName.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}\\.before-restore-\\d{8}-\\d{6}\\.\\d{3})(-wal|-shm)?$`);

/**
 * Removes every set but the newest `keep` (by the UTC time in the name), each set whole (the
 * database and its -wal/-shm). `justWritten` is never removed, even when a clock set back made
 * its name sort first. Returns the names of the removed sets.
 */
export function pruneBeforeRestoreCopies(dbPath: string, justWritten: string, log: Logger, keep = BEFORE_RESTORE_KEEP): string[] {
  const dir = dirname(dbPath);
  const pattern = copyPattern(basename(dbPath));
  const files = readdirSync(dir);
  const sets = new Set<string>();
  for (const f of files) {
    const m = pattern.exec(f);
    if (m) sets.add(m[1]!);
  }
  const newestFirst = [...sets].sort().reverse();
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
  if (removed.length) log.info("已删除较早的恢复前数据库副本", { removed: removed.join(","), kept: kept.length });
  if (failures.length) log.warn("删除恢复前数据库副本失败", { err: failures.join("; ") });
  return removed;
}
