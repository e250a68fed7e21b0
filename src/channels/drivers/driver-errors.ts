/**
 * Error text shared by the drivers. Built from error names and codes only, never from URLs,
 * headers or the server's free text, so no credential can appear in it; nor from the channel's
 * configuration (endpoint, host, port, bucket, directory): configuration parameters never appear
 * in logs or error messages (spec 6.3). A message says which parameter is wrong and why; the
 * callers add the channel's name.
 */
import { hasChinese } from "../../shared/text";

/** Why a request never got an answer (refused, reset, DNS, TLS, timeout), in Chinese. */
export function networkFailureReason(err: unknown): string {
  const e = err as { name?: string; code?: string };
  if (e?.name === "TimeoutError" || e?.name === "AbortError") return "请求超时";
  if (e?.code === "ConnectionRefused" || e?.code === "ECONNREFUSED") return "连接被拒绝";
  if (e?.code === "ECONNRESET" || e?.code === "ConnectionClosed") return "连接被重置";
  if (e?.code === "ENOTFOUND" || e?.code === "DNSException") return "域名解析失败";
  if (e?.code === "EHOSTUNREACH") return "主机不可达";
  if (e?.code === "ENETUNREACH") return "网络不可达";
  if (e?.code === "ETIMEDOUT") return "连接超时";
  if (e?.code === "EPIPE" || e?.code === "ECONNABORTED") return "连接中断";
  // Bun's fetch refuses a URL it cannot parse (a host name like `bucket.127.0.0.1`) before connecting.
  if (e?.code === "ERR_INVALID_URL") return "请求地址无效（检查 endpoint 或 url 配置）";
  if (typeof e?.code === "string" && /CERT|TLS|SSL/i.test(e.code)) return `TLS 错误 ${e.code}`;
  if (typeof e?.code === "string" && /^[A-Za-z_]{1,40}$/.test(e.code)) return `网络错误 ${e.code}`;
  return "网络错误";
}

/**
 * Bounds on a peer's answers read into memory (shared/bounded-read.ts). A sound peer stays far
 * below them: a depth-1 PROPFIND of one of Kura's fanned-out directories, token JSON, an API
 * page of a thousand items; an error body only matters for a code near its start.
 */
export const ANSWER_MAX_BYTES = 8 * 1024 * 1024;
export const TOKEN_MAX_BYTES = 1024 * 1024;
export const ERROR_PREFIX_BYTES = 64 * 1024;

/** The error for an answer over `maxBytes`, naming what was being read. */
export function answerTooLarge(what: string, maxBytes: number): () => Error {
  return () => new Error(`${what}的响应超过 ${Math.round(maxBytes / 1024 / 1024)} MiB，已停止读取（服务端可能异常）`);
}

/**
 * A failure while the body of an answer was read: Kura's own errors (the size bound, the
 * idle deadline) pass unchanged; what the runtime throws (a reset mid-body) is described as
 * a transport failure of `label`.
 */
export function bodyReadError(err: unknown, label: string): Error {
  if (err instanceof Error && hasChinese(err.message)) return err;
  return networkError(err, label);
}

/**
 * A transport failure of `label` (e.g. "S3"). The address it was talking to is configuration
 * (endpoint, url) and is not named: the channel's name, which the callers add, says which one.
 */
export function networkError(err: unknown, label: string): Error {
  return new Error(`${label} 连接失败: ${networkFailureReason(err)}`);
}

/**
 * A directory below a channel's configured base directory `root` (its `path`, "" = none), as
 * errors name it: relative to the base, as object keys are, since the base itself is
 * configuration. `rootLabel` names the base by its parameter ("path 指定的目录").
 */
export function directoryTarget(root: string, dir: string, rootLabel: string): string {
  if (dir === root) return rootLabel;
  if (root === "") return `${dir}/`;
  const base = root.endsWith("/") ? root : `${root}/`;
  if (dir.startsWith(base)) return `${dir.slice(base.length)}/`;
  return `${rootLabel}的上级目录`;
}

/** File-system error codes in Chinese; the code itself follows in parentheses. */
const FS_REASONS: Record<string, string> = {
  ENOENT: "文件或目录不存在",
  EACCES: "没有权限",
  EPERM: "没有权限",
  EROFS: "文件系统只读",
  ENOSPC: "磁盘空间不足",
  EDQUOT: "磁盘配额已用完",
  ENOTDIR: "路径中有非目录项",
  EEXIST: "路径已存在且不是目录",
  EISDIR: "目标是一个目录",
  ENOTEMPTY: "目标是一个非空目录",
  ENAMETOOLONG: "路径过长",
  ELOOP: "符号链接层数过多（可能指向自身）",
  EIO: "磁盘 I/O 错误",
  EBUSY: "文件或目录正被占用",
  ESTALE: "网络文件系统的文件句柄已失效（远端目录被替换或卸载？）",
  EMFILE: "打开的文件过多：请提高进程的文件描述符上限（systemd 单元的 LimitNOFILE=）",
  ENFILE: "打开的文件过多：请提高进程的文件描述符上限（systemd 单元的 LimitNOFILE=）",
};

/**
 * A local disk's file-system error as `<reason> (<code>)`, without the path Node puts in its
 * message (`EACCES: permission denied, open '/mnt/…'`): the path lies in the channel's
 * configured directory. Undefined when `err` carries no known file-system code.
 */
export function fsErrorReason(err: unknown): string | undefined {
  const code = (err as { code?: unknown } | null)?.code;
  if (typeof code !== "string" || !Object.hasOwn(FS_REASONS, code)) return undefined;
  return `${FS_REASONS[code]} (${code})`;
}

/**
 * An error on its way to an admin (channel `last_error`, a replica's error, alerts, webhooks,
 * the log), in Chinese and without internals. Kura's own errors pass unchanged; what a runtime
 * throws while a peer's answer is read (a connection reset mid-body, JSON cut short, memory)
 * is English and may describe internals (`pass verbose: true to fetch()`), so it is replaced
 * by what it means for the channel; a file-system error says what is wrong, not with which path.
 */
export function channelErrorText(err: unknown): string {
  const e = err as { name?: string; message?: string; code?: string } | null;
  const message = typeof e?.message === "string" ? e.message : "";
  if (hasChinese(message)) return message;
  if (e?.name === "SyntaxError" || /JSON/i.test(message)) return "存储服务的响应格式无效（不是完整的 JSON 或 XML）";
  if (/out of memory/i.test(message)) return "存储服务的响应过大，内存不足";
  // The local-disk driver's file-system errors (a read's EMFILE, EACCES) are no network failure.
  // Named without the file's path: it lies in the channel's configured directory.
  const onDisk = fsErrorReason(err);
  // Out of descriptors is the process's condition, not the disk's: said as such.
  if (onDisk) return e?.code === "EMFILE" || e?.code === "ENFILE" ? onDisk : `本地存储读写失败: ${onDisk}`;
  if (e?.name === "TimeoutError" || e?.name === "AbortError" || typeof e?.code === "string") return `与存储服务通信失败: ${networkFailureReason(err)}`;
  return "与存储服务通信失败";
}
