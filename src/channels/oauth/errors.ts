/**
 * Errors of the OAuth backends, shown to admins as probe results and channel
 * `last_error`. They are built from the method, the target (object key or
 * endpoint name), the status and a provider error *code* only — never from
 * headers, URLs with query strings or the provider's free text — so neither an
 * access token nor a refresh token or client secret can leak through them.
 */
export class OAuthError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "OAuthError";
  }
}

/** Provider error codes are short identifiers ("itemNotFound", "path/not_found", "invalid_grant"); anything else is dropped. */
export function safeCode(code: unknown): string {
  return typeof code === "string" && /^[A-Za-z0-9_./-]{1,80}$/.test(code) ? code : "";
}

const HINTS: Record<number, string> = {
  400: "请求无效",
  401: "授权已失效，请重新授权",
  403: "拒绝访问，请检查授权范围或账号权限",
  404: "不存在",
  409: "冲突",
  413: "文件超过服务允许的大小",
  416: "请求的范围无效",
  423: "资源被锁定",
  429: "请求过于频繁",
  507: "存储空间不足",
};

export class ApiRequestError extends Error {
  constructor(
    label: string,
    readonly method: string,
    readonly status: number,
    target: string,
    readonly code = "",
  ) {
    const hint = HINTS[status] ?? (status >= 500 ? "服务器内部错误" : "");
    super(`${label} 请求失败: ${method} ${target}: HTTP ${status}${code ? ` ${code}` : ""}${hint ? ` (${hint})` : ""}`);
    this.name = "ApiRequestError";
  }
}

/**
 * A transport failure (refused, reset, DNS, TLS, timeout) described without the URL: its host
 * may come from the channel's configuration (token_url, region), which is never named (spec 6.3).
 */
export function networkError(err: unknown, label: string): Error {
  const e = err as { name?: string; code?: string };
  let reason = "网络错误";
  if (e?.name === "TimeoutError" || e?.name === "AbortError") reason = "请求超时";
  else if (e?.code === "ConnectionRefused" || e?.code === "ECONNREFUSED") reason = "连接被拒绝";
  else if (e?.code === "ECONNRESET" || e?.code === "ConnectionClosed") reason = "连接被重置";
  else if (e?.code === "ENOTFOUND" || e?.code === "DNSException") reason = "域名解析失败";
  else if (typeof e?.code === "string" && /CERT|TLS|SSL/i.test(e.code)) reason = `TLS 错误 ${e.code}`;
  else if (typeof e?.code === "string" && /^[A-Za-z_]{1,40}$/.test(e.code)) reason = `网络错误 ${e.code}`;
  return new OAuthError(`${label} 连接失败: ${reason}`);
}
