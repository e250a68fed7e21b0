/**
 * Error text shared by the network drivers. Built from error names and codes
 * only, never from URLs, headers or the server's free text, so no credential
 * can appear in it.
 */

/** Why a request never got an answer (refused, reset, DNS, TLS, timeout), in Chinese. */
export function networkFailureReason(err: unknown): string {
  const e = err as { name?: string; code?: string };
  if (e?.name === "TimeoutError" || e?.name === "AbortError") return "请求超时";
  if (e?.code === "ConnectionRefused" || e?.code === "ECONNREFUSED") return "连接被拒绝";
  if (e?.code === "ECONNRESET" || e?.code === "ConnectionClosed") return "连接被重置";
  if (e?.code === "ENOTFOUND" || e?.code === "DNSException") return "域名解析失败";
  if (typeof e?.code === "string" && /CERT|TLS|SSL/i.test(e.code)) return `TLS 错误 ${e.code}`;
  if (typeof e?.code === "string" && /^[A-Za-z_]{1,40}$/.test(e.code)) return `网络错误 ${e.code}`;
  return "网络错误";
}

/** A transport failure of `label` (e.g. "S3") talking to `where` (an address already free of secrets). */
export function networkError(err: unknown, label: string, where: string): Error {
  return new Error(`${label} 连接失败: ${where}: ${networkFailureReason(err)}`);
}
