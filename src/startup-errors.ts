/**
 * A start that cannot go on ends with one `启动失败` line saying what to do, never a stack
 * trace: the operator reads it in `journalctl`, and systemd restarts the unit into the same
 * line until it is fixed.
 */
import { statSync } from "node:fs";
import { StartupError } from "./boot";
import { BootstrapError } from "./config/bootstrap";
import { DataDirError } from "./datadir/lock";
import { isSqliteDamage } from "./db/damage";
import type { Logger } from "./ops/log";

const ownerOf = (path: string): number | undefined => {
  try {
    return statSync(path).uid;
  } catch {
    return undefined;
  }
};

/** The reason in Chinese for the failures an operator can fix: permissions, a full disk, a damaged database. */
export function describeFailure(err: unknown, dataDir: string): string {
  if (err instanceof StartupError || err instanceof DataDirError || err instanceof BootstrapError) return err.message;
  const e = err as NodeJS.ErrnoException & { code?: string };
  const message = e?.message ?? String(err);
  if (e?.code === "EACCES" || e?.code === "EPERM") {
    const path = e.path ?? dataDir;
    const owner = ownerOf(path);
    const uid = process.getuid?.();
    const whose = owner !== undefined && owner !== uid ? `（属主 uid ${owner}，Kura 以 uid ${uid} 运行）` : "";
    return `没有权限访问 ${path}${whose}：数据目录中的文件须属于运行 Kura 的用户，例如 chown -R kura:kura ${dataDir}（以 root 运行过 kura 命令会留下 root 的文件）`;
  }
  if (e?.code === "ENOSPC") return `磁盘已满：${e.path ?? dataDir} 所在的文件系统没有剩余空间`;
  if (e?.code === "EROFS") return `文件系统只读：${e.path ?? dataDir}（systemd 单元的 ProtectSystem=strict 需要 ReadWritePaths= 指向它）`;
  if (isSqliteDamage(err)) return `数据库文件已损坏（${message}）：请用 kura restore 从快照恢复`;
  return message;
}

/** Logs the one line and gives the exit code. */
export function startupFailure(err: unknown, dataDir: string, log: Pick<Logger, "error">): number {
  log.error("启动失败", { err: describeFailure(err, dataDir) });
  return 1;
}

/** Why the port could not be listened on, in Chinese for the two usual causes. */
export function listenFailure(err: unknown, port: number): string {
  const code = (err as { code?: string })?.code;
  if (code === "EADDRINUSE") return `端口 ${port} 已被其他程序占用（KURA_LISTEN 可换端口）`;
  if (code === "EACCES") return `没有权限监听端口 ${port}（1024 以下的端口需要 root 或 CAP_NET_BIND_SERVICE）`;
  return (err as Error)?.message ?? String(err);
}
