/**
 * Error text shared by the network drivers. Built from error names and codes
 * only, never from URLs, headers or the server's free text, so no credential
 * can appear in it.
 */
import { fsProblem } from "../../shared/fs-errors";
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
 * a transport failure of `label` at `where`.
 */
export function bodyReadError(err: unknown, label: string, where: string): Error {
  if (err instanceof Error && hasChinese(err.message)) return err;
  return networkError(err, label, where);
}

/** A transport failure of `label` (e.g. "S3") talking to `where` (an address already free of secrets). */
export function networkError(err: unknown, label: string, where: string): Error {
  return new Error(`${label} 连接失败: ${where}: ${networkFailureReason(err)}`);
}

/**
 * An error on its way to an admin (channel `last_error`, a replica's error, alerts, webhooks,
 * the log), in Chinese and without internals. Kura's own errors pass unchanged; what a runtime
 * throws while a peer's answer is read (a connection reset mid-body, JSON cut short, memory)
 * is English and may describe internals (`pass verbose: true to fetch()`), so it is replaced
 * by what it means for the channel; a file-system error says what is wrong with which file.
 */
export function channelErrorText(err: unknown): string {
  const e = err as { name?: string; message?: string; code?: string } | null;
  const message = typeof e?.message === "string" ? e.message : "";
  if (hasChinese(message)) return message;
  if (e?.name === "SyntaxError" || /JSON/i.test(message)) return "存储服务的响应格式无效（不是完整的 JSON 或 XML）";
  if (/out of memory/i.test(message)) return "存储服务的响应过大，内存不足";
  // The local-disk driver's file-system errors (a read's EMFILE, EACCES) are no network failure.
  const onDisk = fsProblem(err);
  if (onDisk) return onDisk;
  if (e?.name === "TimeoutError" || e?.name === "AbortError" || typeof e?.code === "string") return `与存储服务通信失败: ${networkFailureReason(err)}`;
  return "与存储服务通信失败";
}
