/**
 * What Kura keeps directly in its data directory, by name, so a start can tell its own directory
 * from someone else's: `KURA_DATA_DIR` pointed at a home directory or `/var/lib` by mistake must
 * not have its `tmp/` emptied and every file in it made private.
 */
import { readdirSync } from "node:fs";
import { DataDirError } from "./lock";

/** kura.db (and -wal, -shm, .before-migration-…), kura.lock, restore.staged.db, restore.rejected-…, the folders, the key. */
const KURA_PREFIXES = ["kura.", "kura-", "restore."];
const KURA_NAMES = new Set(["master.key", "backup.in-progress", "tmp", "variants", "storage", "multipart"]);
/** Not anyone's data: a file system's own folder (a disk mounted there) and hidden files (a shell's, a cache's). */
const IGNORED = (name: string) => name === "lost+found" || name.startsWith(".");

export function isKuraEntry(name: string): boolean {
  return KURA_NAMES.has(name) || KURA_PREFIXES.some((p) => name.startsWith(p));
}

/** Files only Kura makes: the database, its lock and key, a staged restore. (`tmp`, `storage`: too common a name to prove anything.) */
const MARKERS = new Set(["kura.db", "kura.lock", "master.key", "restore.staged.db"]);

/**
 * Refuses a data directory that is neither empty (or new), nor Kura's (it holds the database, the
 * lock or the key), nor made of Kura's names alone (a `storage/` mounted before the first start):
 * a home directory with a `tmp/` in it is none of these. Call before anything is written there.
 */
export function refuseForeignDataDir(dataDir: string): void {
  let names: string[];
  try {
    names = readdirSync(dataDir);
  } catch {
    return; // absent (created later) or unreadable (the lock reports it)
  }
  const others = names.filter((n) => !IGNORED(n));
  if (others.some((n) => MARKERS.has(n)) || others.every(isKuraEntry)) return;
  const shown = others.slice(0, 5).join("、") + (others.length > 5 ? ` 等 ${others.length} 项` : "");
  throw new DataDirError(
    `数据目录 ${dataDir} 中已有其他文件（${shown}），不是 Kura 的数据目录：Kura 会在数据目录中建库、清空 tmp/ 并收紧权限，请用 KURA_DATA_DIR 指定一个空目录或新路径`,
  );
}
