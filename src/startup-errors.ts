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
import { fsProblem } from "./shared/fs-errors";
import { hasChinese } from "./shared/text";

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
  // Any other file-system error (a path that is a file where a directory belongs…), then whatever
  // else in one Chinese line: the runtime's own text (English) stays only as the detail.
  return fsProblem(err) ?? (hasChinese(message) ? message : `未预期的错误（${message}）`);
}

/** Logs the one line and gives the exit code. */
export function startupFailure(err: unknown, dataDir: string, log: Pick<Logger, "error">): number {
  log.error("启动失败", { err: describeFailure(err, dataDir) });
  return 1;
}

/**
 * Why KURA_LISTEN could not be listened on, in Chinese. Beyond the codes for a port in use or a
 * privileged port, Bun's errors do not tell the causes apart reliably: the delivery threads' port
 * probe (Bun.listen) says only "Failed to listen at <host>" for a taken port and a foreign address
 * alike, and Bun.serve gives EADDRNOTAVAIL, EINVAL, a failed name lookup or even a stale errno
 * (EEXIST). So the rest get one sentence naming what to check, without a code that could mislead.
 */
export function listenFailure(err: unknown, listen: { text: string; port: number }): string {
  const code = (err as { code?: unknown } | null)?.code;
  if (code === "EADDRINUSE") return `端口 ${listen.port} 已被其他程序占用（KURA_LISTEN 可换端口）`;
  if (code === "EACCES") return `没有权限监听端口 ${listen.port}（1024 以下的端口需要 root 或 CAP_NET_BIND_SERVICE）`;
  return `无法监听 ${listen.text}：请确认端口 ${listen.port} 没有被其他程序占用，且 KURA_LISTEN 中的地址属于本机、是有效的 IP 地址或主机名（例如 0.0.0.0:8080、127.0.0.1:8080 或 [::]:8080）`;
}
