/**
 * Conditions of the server rather than faults of a request (a full disk, the descriptor limit, the
 * database locked by another process, a file system gone read-only), whichever surface meets them: each
 * is answered as a retryable 503 in the surface's own form (http/disk-full.ts, s3/errors.ts,
 * delivery's plain text), and the operator hears what to change from one ERROR line.
 */
import { requestIdFor } from "./request-trace";
import { isDatabaseLocked, isDiskFull, isOutOfFileDescriptors, isStorageFailing } from "../errors";
import { rawTarget } from "../shared/url-target";
import type { Logger } from "./log";

const DISK_FULL_MESSAGE = "服务器存储空间不足，暂时无法写入，请稍后重试或联系管理员";

const TOO_MANY_OPEN_FILES_MESSAGE = "服务器同时打开的文件已达上限，暂时无法处理，请稍后重试";

const DATABASE_LOCKED_MESSAGE = "服务器数据库暂时被占用，请稍后重试";

const STORAGE_FAILING_MESSAGE = "服务器存储发生故障，暂时无法写入，请稍后重试或联系管理员";

export interface ServerFault {
  /** What the operator reads in the ERROR line. */
  log: string;
  /** What the client reads. */
  message: string;
  headers: Record<string, string>;
}

const SERVER_FAULTS: (ServerFault & { is: (err: unknown) => boolean })[] = [
  { is: isDiskFull, log: "磁盘空间不足，写入失败", message: DISK_FULL_MESSAGE, headers: { "retry-after": "60" } },
  {
    is: isOutOfFileDescriptors,
    log: "打开的文件过多，请求失败：请提高进程的文件描述符上限（systemd 单元的 LimitNOFILE=）",
    message: TOO_MANY_OPEN_FILES_MESSAGE,
    headers: { "retry-after": "5" },
  },
  {
    is: isDatabaseLocked,
    log: "数据库被锁定（另一个连接长时间持有写锁），请求失败：请检查是否有程序正在写入 kura.db（例如停在事务中的 sqlite3 命令行）",
    message: DATABASE_LOCKED_MESSAGE,
    headers: { "retry-after": "5" },
  },
  {
    is: isStorageFailing,
    log: "数据目录无法写入（文件系统已变为只读或磁盘 I/O 错误），请求失败：请查看 dmesg 中的磁盘错误，修复文件系统（fsck）并重新挂载为可写后重启 Kura",
    message: STORAGE_FAILING_MESSAGE,
    // It does not end by itself: an operator has to repair the disk.
    headers: { "retry-after": "300" },
  },
];

/** The server fault behind `err` (a fresh copy: callers may add headers), or undefined for anything else. */
export function serverFaultOf(err: unknown): ServerFault | undefined {
  const fault = SERVER_FAULTS.find((f) => f.is(err));
  return fault && { log: fault.log, message: fault.message, headers: { ...fault.headers } };
}

/**
 * An ERROR line for a request that failed, with its method, path and the error's message. The
 * path without parsing the URL: logging must not throw for a URL Bun built from a bad Host.
 */
export function logFailedRequest(log: Pick<Logger, "error">, msg: string, request: Request, err: unknown) {
  log.error(msg, {
    method: request.method,
    path: rawTarget(request.url).path,
    request_id: requestIdFor(request),
    err: err instanceof Error ? err.message : String(err),
  });
}

/** Logs the server fault a request met and returns it; undefined (nothing logged) for anything else. */
export function logServerFault(log: Pick<Logger, "error">, request: Request, err: unknown): ServerFault | undefined {
  const fault = serverFaultOf(err);
  if (fault) {
    logFailedRequest(log, fault.log, request, err);
    noticeServerFault(err);
  }
  return fault;
}

const watchers = new Set<(err: unknown) => void>();

/**
 * Calls `watcher` with every server fault a request or a background round meets (the database
 * lock breaker); returns the function that stops it.
 */
export function watchServerFaults(watcher: (err: unknown) => void): () => void {
  watchers.add(watcher);
  return () => watchers.delete(watcher);
}

/** Tells the watchers of a fault met outside a request (a background round's failure). */
export function noticeServerFault(err: unknown) {
  for (const watcher of watchers) watcher(err);
}
