import { accessSync, chmodSync, constants, copyFileSync, mkdirSync, rmSync } from "node:fs";
import { resolve } from "node:path";
import type { Bootstrap } from "../config/bootstrap";
import { loadMasterKey, masterKeyPath } from "../config/master-key";
import { DataDirError, DataDirLockedError, lockDataDir } from "../datadir/lock";
import { stagedPath, stagingPartialPath } from "../ops/backups";
import { BEFORE_RESTORE_KEEP } from "../ops/restore-copies";
import { snapshotProblem } from "../ops/snapshot-check";
import { renameDurably } from "../shared/durable-file";
import { fsProblem } from "../shared/fs-errors";

/** Whether a service currently holds the data directory (the staged file then waits for its restart). */
function serviceRunning(dataDir: string): boolean {
  try {
    lockDataDir(dataDir).release();
    return false;
  } catch (err) {
    if (err instanceof DataDirLockedError) return true;
    if (err instanceof DataDirError) return false;
    throw err;
  }
}

/**
 * Why the snapshot cannot be read, in Chinese; null when it can. The recovery steps download it
 * as root (often into /root, mode 0700) and run the restore as the service user: that is a
 * permission problem with the snapshot's place, not a missing file nor the data directory's owner.
 */
function unreadableReason(source: string): string | null {
  try {
    accessSync(source, constants.R_OK);
    return null;
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === "EACCES" || code === "EPERM") {
      return `当前用户（uid ${process.getuid?.()}）无法读取快照文件 ${source}：请把它放到该用户可读的位置（例如数据目录中），或调整其权限后重试`;
    }
    if (code === "ENOENT" || code === "ENOTDIR") return `找不到快照文件：${source}`;
    return fsProblem(err) ?? `无法读取快照文件 ${source}：${(err as Error).message}`;
  }
}

/**
 * `kura restore FILE`: stages a snapshot downloaded by hand (new-machine recovery) as
 * `restore.staged.db`; the next start swaps it in exactly like a restore from the console.
 * The master key the snapshot was taken with must already be in place, so a wrong key is
 * refused now and not at the next start. Creates the data directory if needed.
 */
export function restoreFromFile(boot: Bootstrap, file: string): number {
  const source = resolve(file);
  const unreadable = unreadableReason(source);
  if (unreadable) {
    console.error(unreadable);
    return 1;
  }
  let key;
  try {
    key = loadMasterKey(boot.dataDir, boot.masterKeyEnv);
  } catch (err) {
    console.error(`主密钥无效：${(err as Error).message}`);
    return 1;
  }
  if (!key) {
    console.error(`缺少主密钥：请先把原机器的 master.key 放到 ${masterKeyPath(boot.dataDir)}（模式 0600），或设置 KURA_MASTER_KEY`);
    return 1;
  }
  // The whole file is read once here (a CLI, nothing waits on it): the start then swaps it in.
  const problem = snapshotProblem(source, { keyFingerprint: key.fingerprint, integrity: true });
  if (problem) {
    console.error(`${source} 无法恢复：${problem}`);
    return 1;
  }
  const target = stagedPath(boot.dataDir);
  const partial = stagingPartialPath(boot.dataDir);
  try {
    mkdirSync(boot.dataDir, { recursive: true, mode: 0o700 });
    copyFileSync(source, partial);
    chmodSync(partial, 0o600);
    // "已暂存" must hold after a crash or power cut: the copy is synced and named before it is said.
    renameDurably(partial, target);
  } catch (err) {
    console.error(`无法把快照写入数据目录 ${boot.dataDir}：${fsProblem(err) ?? (err as Error).message}（检查 KURA_DATA_DIR 与目录权限）`);
    return 1;
  } finally {
    rmSync(partial, { force: true });
  }
  console.log(`已暂存快照 ${source} → ${target}`);
  console.log(
    serviceRunning(boot.dataDir)
      ? `Kura 正在运行：重启服务后换入（systemctl restart kura），原数据库会保留为 kura.db.before-restore-<时间>（只保留最近 ${BEFORE_RESTORE_KEEP} 份）`
      : `下次启动 Kura 时换入；若已有数据库，会保留为 kura.db.before-restore-<时间>（只保留最近 ${BEFORE_RESTORE_KEEP} 份）`,
  );
  return 0;
}
