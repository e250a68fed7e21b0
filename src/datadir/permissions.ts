/**
 * Installations older than the umask 077 change left a world-readable data directory (kura.db
 * 0644 with password, token and session hashes, snapshots 0644, directories 0755). This version
 * creates everything private (files 0600, directories 0700: main.ts sets umask 077), so a start
 * takes what it would have created itself down to the same: group and other bits cleared.
 */
import { chmodSync, lstatSync, readdirSync } from "node:fs";
import { join } from "node:path";
import type { Logger } from "../ops/log";
import { isKuraEntry } from "./entries";

/** Where the built-in channel keeps snapshots, below <data_dir>/storage. */
const BACKUP_DIRS = [join("storage", "_kura"), join("storage", "_kura", "backups")];

/**
 * Clears group/other bits of the data directory, Kura's own entries directly in it (entries.ts:
 * an operator's file kept there is not touched), and the built-in channel's snapshot folders and
 * snapshots. Image objects below storage/ and variants/ are not
 * walked (a large library; their directories are private now, so nobody else reaches them).
 * Symbolic links (an admin's mount) and files this user does not own are left alone. Logs once
 * what was changed; returns the changed paths, relative to the data directory.
 */
export function tightenDataDirPermissions(dataDir: string, log: Logger): string[] {
  const uid = process.getuid?.();
  const changed: string[] = [];
  const skipped: string[] = [];
  const tighten = (rel: string) => {
    const path = join(dataDir, rel);
    let st;
    try {
      st = lstatSync(path);
    } catch {
      return;
    }
    if (st.isSymbolicLink() || (!st.isFile() && !st.isDirectory()) || (st.mode & 0o077) === 0) return;
    if (uid !== undefined && st.uid !== uid) {
      skipped.push(rel || ".");
      return;
    }
    try {
      chmodSync(path, st.mode & 0o7700);
      changed.push(`${rel || "."}(${(st.mode & 0o777).toString(8)}→${(st.mode & 0o700).toString(8)})`);
    } catch {
      skipped.push(rel || ".");
    }
  };
  const entries = (rel: string) => {
    try {
      return readdirSync(join(dataDir, rel)).map((f) => join(rel, f));
    } catch {
      return [];
    }
  };
  tighten("");
  for (const rel of entries("")) if (isKuraEntry(rel)) tighten(rel);
  for (const dir of BACKUP_DIRS) tighten(dir);
  for (const rel of entries(BACKUP_DIRS[1]!)) tighten(rel);
  if (changed.length) {
    log.warn("已收紧旧版本创建的数据目录权限（组和其他用户不再可读）", { count: changed.length, changed: changed.slice(0, 20).join(",") });
  }
  if (skipped.length) log.warn("数据目录中有文件不属于运行 Kura 的用户，未改其权限", { paths: skipped.slice(0, 20).join(",") });
  return changed.map((c) => c.replace(/\(.*$/, ""));
}
