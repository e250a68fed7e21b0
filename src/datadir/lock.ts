import { Database } from "bun:sqlite";
import { accessSync, constants, mkdirSync } from "node:fs";
import { join } from "node:path";
import { isSqliteDamage } from "../db/damage";
import { fsProblem } from "../shared/fs-errors";

/** The data directory cannot be locked (not creatable, not writable); the message is shown as is. */
export class DataDirError extends Error {}

/** Raised when another process holds the data directory; the message names the directory and the remedy. */
export class DataDirLockedError extends DataDirError {}

export const LOCK_FILE = "kura.lock";

/** Held connections: referenced here so a collected Database can never drop a lock early. */
const held = new Set<Database>();

/**
 * Takes an exclusive lock on the data directory for the life of the process, so two
 * instances never write one database and one storage folder. The lock is SQLite's own
 * (a POSIX record lock held by a connection in EXCLUSIVE locking mode): the kernel drops
 * it when the process dies, so a crash never leaves a stale lock behind, and it needs no
 * native code in the single-file executable.
 */
export function lockDataDir(dataDir: string): { release(): void } {
  const path = join(dataDir, LOCK_FILE);
  let db: Database;
  try {
    mkdirSync(dataDir, { recursive: true, mode: 0o700 });
    db = new Database(path, { create: true });
  } catch (err) {
    throw new DataDirError(`无法在数据目录 ${dataDir} 中创建锁文件 ${LOCK_FILE}：${fsProblem(err) ?? (err as Error).message}（检查 KURA_DATA_DIR 与目录权限）`);
  }
  try {
    // SQLite opens a file it may not write read-only, without a word, and a read-only connection
    // holds no exclusive lock: two servers would then share the directory.
    accessSync(path, constants.W_OK);
  } catch {
    db.close();
    throw new DataDirError(
      `锁文件 ${path} 不可写（属主或权限不对），无法锁定数据目录：数据目录中的文件须属于运行 Kura 的用户，例如 chown -R kura:kura ${dataDir}`,
    );
  }
  try {
    db.exec("PRAGMA busy_timeout = 0");
    db.exec("PRAGMA locking_mode = EXCLUSIVE");
    db.exec("PRAGMA journal_mode = MEMORY");
    // BEGIN EXCLUSIVE takes the lock and the locking mode keeps it after COMMIT. Nothing is
    // written, so a start that is refused later (wrong master key) leaves the file unchanged.
    db.exec("BEGIN EXCLUSIVE");
    db.exec("COMMIT");
  } catch (err) {
    db.close();
    if (/locked|busy/i.test((err as Error).message)) {
      throw new DataDirLockedError(
        `数据目录 ${dataDir} 已被另一个 Kura 进程占用（锁文件 ${LOCK_FILE}）；同一数据目录只能运行一个实例，请先停止它，或用 KURA_DATA_DIR 指定另一个目录`,
      );
    }
    // The file holds no data; it is not removed here, because a second process doing the same at
    // the same moment could then lock a different file.
    if (isSqliteDamage(err)) {
      throw new DataDirError(`锁文件 ${path} 已损坏：它不含任何数据，确认没有 Kura 进程在运行后删除它，再重新执行`);
    }
    throw err;
  }
  held.add(db);
  return {
    release: () => {
      held.delete(db);
      db.close();
    },
  };
}

/**
 * For a command that also works beside a running service (reset-password): the lock when no
 * other process holds the directory (the command then owns it, as a start would), undefined when
 * a service holds it.
 */
export function lockIfFree(dataDir: string): { release(): void } | undefined {
  try {
    return lockDataDir(dataDir);
  } catch (err) {
    if (err instanceof DataDirLockedError) return undefined;
    throw err;
  }
}
