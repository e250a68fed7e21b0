import { readTextPrefix } from "../../../shared/bounded-read";
import { ERROR_PREFIX_BYTES } from "../driver-errors";
import { text } from "./xml";

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
  // Only a prefix is read (`<Code>` comes first): a peer could answer an error with gigabytes.
  const body = await readTextPrefix(response, ERROR_PREFIX_BYTES);
  let code = text(body, "Code") ?? "";
  // Codes are identifiers; anything else is not something we want to echo.
  if (!/^[A-Za-z0-9.]{1,64}$/.test(code)) code = "";
  return new S3RequestError(response.status, code);
}
