/**
 * Hands out a valid access token for one channel, refreshing it at the
 * provider's token endpoint when it has expired or the API rejected it (401).
 * A refresh is single-flight (concurrent requests wait for the same one) and
 * its result is reported through `onRefreshed` so the owner can persist it —
 * providers may rotate the refresh token, and losing the new one would lock
 * the channel out after the old one lapses.
 */
import { readBoundedText, readTextPrefix } from "../../shared/bounded-read";
import { answerTooLarge, bodyReadError, ERROR_PREFIX_BYTES, TOKEN_MAX_BYTES } from "../drivers/driver-errors";
import { networkError, OAuthError, safeCode } from "./errors";
import { isExpired, serializeToken, tokenFromResponse, type OAuthToken } from "./token";

export type FetchLike = (input: string | URL | Request, init?: RequestInit) => Promise<Response>;

/** The OAuth application of a channel (rclone's client_id / client_secret / token_url). */
export interface OAuthApp {
  clientId: string;
  clientSecret: string;
  tokenUrl: string;
}

const TOKEN_TIMEOUT_MS = 30_000;

/** POSTs a form to the token endpoint and returns the parsed JSON; errors name only the OAuth error code. */
export async function callTokenEndpoint(app: OAuthApp, form: Record<string, string>, label: string, fetchFn: FetchLike): Promise<unknown> {
  // Credentials go in the body (RFC 6749 2.3.1): every supported provider accepts that form.
  const params = new URLSearchParams({ ...form, client_id: app.clientId });
  if (app.clientSecret) params.set("client_secret", app.clientSecret);
  let response: Response;
  try {
    response = await fetchFn(app.tokenUrl, {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded", accept: "application/json" },
      body: params.toString(),
      redirect: "manual",
      signal: AbortSignal.timeout(TOKEN_TIMEOUT_MS),
    });
  } catch (err) {
    throw networkError(err, `${label} 令牌接口`);
  }
  // Bounded: token JSON is small, and a refusal only matters for the `error` code at its start.
  const text = response.ok
    ? await readBoundedText(response, TOKEN_MAX_BYTES, answerTooLarge(`${label} 令牌接口`, TOKEN_MAX_BYTES)).catch((err) => {
        throw bodyReadError(err, `${label} 令牌接口`);
      })
    : await readTextPrefix(response, ERROR_PREFIX_BYTES);
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    body = undefined;
  }
  if (!response.ok) {
    const code = safeCode((body as { error?: unknown } | undefined)?.error);
    const hint = code === "invalid_grant" ? "，授权已失效或被撤销，请重新授权" : code === "invalid_client" ? "，请检查 client_id 和 client_secret" : "";
    throw new OAuthError(`${label} 令牌接口返回 HTTP ${response.status}${code ? ` (${code})` : ""}${hint}`);
  }
  if (body === undefined) throw new OAuthError(`${label} 令牌接口的响应不是 JSON`);
  return body;
}

export class TokenSource {
  private refreshing: Promise<OAuthToken> | null = null;

  constructor(
    private token: OAuthToken,
    private readonly app: OAuthApp,
    private readonly label: string,
    private readonly fetchFn: FetchLike,
    private readonly onRefreshed?: (tokenJson: string) => void,
  ) {}

  /** The current token, refreshed first when it has expired. */
  async current(): Promise<OAuthToken> {
    if (this.refreshing) return this.refreshing;
    if (isExpired(this.token)) return this.refresh();
    return this.token;
  }

  /**
   * The API answered 401 to `rejected`: refresh, unless another request already
   * did (then the newer token is simply retried).
   */
  async afterRejection(rejected: OAuthToken): Promise<OAuthToken> {
    if (this.refreshing) return this.refreshing;
    if (this.token.accessToken !== rejected.accessToken) return this.token;
    return this.refresh();
  }

  private refresh(): Promise<OAuthToken> {
    this.refreshing ??= this.doRefresh().finally(() => {
      this.refreshing = null;
    });
    return this.refreshing;
  }

  private async doRefresh(): Promise<OAuthToken> {
    if (!this.token.refreshToken) throw new OAuthError(`${this.label} 令牌已过期且没有 refresh_token，请重新授权`);
    if (!this.app.clientId) {
      throw new OAuthError(`${this.label} 令牌已过期，刷新需要自建应用的 client_id 和 client_secret，请填写后重新授权`);
    }
    const body = await callTokenEndpoint(this.app, { grant_type: "refresh_token", refresh_token: this.token.refreshToken }, this.label, this.fetchFn);
    this.token = tokenFromResponse(body, this.token.refreshToken, this.label);
    this.onRefreshed?.(serializeToken(this.token));
    return this.token;
  }
}
