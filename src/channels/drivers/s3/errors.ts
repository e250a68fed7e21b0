import { text } from "./xml.ts";

/**
 * Errors shown to admins (channel `last_error`, probe results). Built only from
 * the HTTP status and the S3 error code, never from request data or the
 * server's free-text message, so credentials cannot leak into them.
 */
export class S3RequestError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
  ) {
    const hint = HINTS[code] ?? (status === 403 ? "拒绝访问" : "");
    super(`S3 请求失败: ${status}${code ? ` ${code}` : ""}${hint ? ` (${hint})` : ""}`);
    this.name = "S3RequestError";
  }
}

const HINTS: Record<string, string> = {
  AccessDenied: "拒绝访问，请检查密钥权限",
  SignatureDoesNotMatch: "签名不匹配，请检查 secret_access_key",
  InvalidAccessKeyId: "access_key_id 不存在",
  InvalidToken: "session_token 无效",
  ExpiredToken: "session_token 已过期",
  NoSuchBucket: "存储桶不存在",
  AuthorizationHeaderMalformed: "region 可能不正确",
  PermanentRedirect: "endpoint 或 region 不正确",
  RequestTimeTooSkewed: "服务器时间与 S3 相差过大",
  SlowDown: "请求过于频繁",
  InvalidRange: "请求的范围无效",
  BucketAlreadyExists: "存储桶名称已被他人占用",
};

/** Reads the error code from an S3 error response (HEAD responses have no body). */
export async function errorFromResponse(response: Response): Promise<S3RequestError> {
  let code = "";
  try {
    const body = await response.text();
    code = text(body, "Code") ?? "";
  } catch {
    // No readable body: the status alone has to do.
  }
  // Codes are identifiers; anything else is not something we want to echo.
  if (!/^[A-Za-z0-9.]{1,64}$/.test(code)) code = "";
  return new S3RequestError(response.status, code);
}

/** A transport failure (refused, reset, DNS, TLS, timeout) described without the URL's secrets. */
export function networkError(err: unknown, origin: string): Error {
  const e = err as { name?: string; code?: string };
  let reason = "网络错误";
  if (e?.name === "TimeoutError" || e?.name === "AbortError") reason = "请求超时";
  else if (e?.code === "ConnectionRefused" || e?.code === "ECONNREFUSED") reason = "连接被拒绝";
  else if (e?.code === "ECONNRESET" || e?.code === "ConnectionClosed") reason = "连接被重置";
  else if (e?.code === "ENOTFOUND" || e?.code === "DNSException") reason = "域名解析失败";
  else if (typeof e?.code === "string" && /CERT|TLS|SSL/i.test(e.code)) reason = `TLS 错误 ${e.code}`;
  else if (typeof e?.code === "string" && /^[A-Za-z_]{1,40}$/.test(e.code)) reason = `网络错误 ${e.code}`;
  return new Error(`S3 连接失败: ${origin}: ${reason}`);
}
