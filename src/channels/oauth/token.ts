/**
 * OAuth tokens exactly as rclone stores them in its config (`token = {...}`):
 * {"access_token","token_type","refresh_token","expiry"} with an RFC 3339
 * expiry (Go's zero time "0001-01-01T00:00:00Z" means "never expires"). Keeping
 * this shape means the sealed config exports to rclone unchanged and a token
 * pasted from `rclone authorize` works here.
 */
import { OAuthError } from "./errors";

export interface OAuthToken {
  accessToken: string;
  tokenType: string;
  refreshToken: string;
  /** null = no expiry known (Go's zero time). */
  expiry: Date | null;
}

/** Go's zero time, which oauth2 writes for a token without expiry. */
const ZERO_TIME = "0001-01-01T00:00:00Z";

/** Parses the `token` config value; the message never echoes the value. */
export function parseToken(json: string | undefined, label: string): OAuthToken {
  if (!json || json.trim() === "") throw new OAuthError(`${label} 缺少 token 配置，请先完成授权`);
  let raw: unknown;
  try {
    raw = JSON.parse(json);
  } catch {
    throw new OAuthError(`${label} 的 token 不是有效的 JSON（应为 rclone 格式的 OAuth 令牌）`);
  }
  const t = raw as Record<string, unknown>;
  if (typeof t !== "object" || t === null || typeof t.access_token !== "string") {
    throw new OAuthError(`${label} 的 token 缺少 access_token（应为 rclone 格式的 OAuth 令牌）`);
  }
  let expiry: Date | null = null;
  if (typeof t.expiry === "string" && t.expiry !== "") {
    const parsed = new Date(t.expiry);
    if (Number.isNaN(parsed.getTime())) throw new OAuthError(`${label} 的 token 中 expiry 不是有效的 RFC 3339 时间`);
    // Go's zero time (year 1) means "no expiry".
    expiry = parsed.getUTCFullYear() <= 1 ? null : parsed;
  }
  return {
    accessToken: t.access_token,
    tokenType: typeof t.token_type === "string" && t.token_type !== "" ? t.token_type : "Bearer",
    refreshToken: typeof t.refresh_token === "string" ? t.refresh_token : "",
    expiry,
  };
}

/** rclone's form: one line, fixed key order, RFC 3339 expiry. */
export function serializeToken(token: OAuthToken): string {
  return JSON.stringify({
    access_token: token.accessToken,
    token_type: token.tokenType,
    ...(token.refreshToken ? { refresh_token: token.refreshToken } : {}),
    expiry: token.expiry ? token.expiry.toISOString() : ZERO_TIME,
  });
}

/** Like Go's oauth2: a token is treated as expired a little early, so it does not lapse mid-request. */
const EXPIRY_MARGIN_MS = 30_000;

export function isExpired(token: OAuthToken, now = Date.now()): boolean {
  return token.expiry !== null && token.expiry.getTime() - EXPIRY_MARGIN_MS <= now;
}

/** The Authorization header value; like Go's oauth2, "bearer" is normalised to "Bearer". */
export function authorizationHeader(token: OAuthToken): string {
  const type = token.tokenType.toLowerCase() === "bearer" ? "Bearer" : token.tokenType;
  return `${type} ${token.accessToken}`;
}

/**
 * A token endpoint's JSON answer (RFC 6749 5.1) → our token. A refresh answer
 * without a refresh_token keeps the previous one (Google and Dropbox do not
 * rotate refresh tokens; Microsoft does).
 */
export function tokenFromResponse(body: unknown, previousRefresh: string, label: string, now = Date.now()): OAuthToken {
  const b = body as Record<string, unknown>;
  if (typeof b !== "object" || b === null || typeof b.access_token !== "string" || b.access_token === "") {
    throw new OAuthError(`${label} 令牌接口的响应缺少 access_token`);
  }
  const expiresIn = Number(b.expires_in);
  return {
    accessToken: b.access_token,
    tokenType: typeof b.token_type === "string" && b.token_type !== "" ? b.token_type : "Bearer",
    refreshToken: typeof b.refresh_token === "string" && b.refresh_token !== "" ? b.refresh_token : previousRefresh,
    expiry: Number.isFinite(expiresIn) && expiresIn > 0 ? new Date(now + expiresIn * 1000) : null,
  };
}
