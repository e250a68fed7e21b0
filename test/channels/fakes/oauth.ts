/**
 * The OAuth half every provider fake shares: an `/authorize` page that
 * "consents" at once and redirects back with `code` and `state`, and a
 * `/token` endpoint for the authorization_code and refresh_token grants. It is
 * strict like the real ones: wrong client credentials, a reused code, a
 * mismatched redirect_uri or PKCE verifier are refused, and access tokens
 * expire (or can be expired by the test) so the API answers 401.
 */
import { createHash, randomBytes } from "node:crypto";

export interface FakeOAuthOptions {
  /** Issue a new refresh token on every refresh (Microsoft does; Google and Dropbox do not). */
  rotateRefreshTokens?: boolean;
  expiresInSeconds?: number;
}

interface PendingCode {
  redirectUri: string;
  challenge: string;
  scope: string;
}

const random = (prefix: string) => `${prefix}-${randomBytes(16).toString("hex")}`;

export class FakeOAuth {
  readonly clientId = random("client");
  readonly clientSecret = random("secret");
  private readonly codes = new Map<string, PendingCode>();
  private readonly refreshTokens = new Set<string>();
  /** access token → expiry (ms since epoch). */
  private readonly accessTokens = new Map<string, number>();
  /** Every /authorize query the fake saw (the test checks scope, state, redirect_uri). */
  readonly authorizeRequests: URLSearchParams[] = [];
  /** grant_type of every accepted /token call. */
  readonly grants: string[] = [];

  constructor(private readonly opts: FakeOAuthOptions = {}) {}

  /** Handles /authorize and /token; null for any other path. */
  async handle(req: Request, url: URL): Promise<Response | null> {
    if (url.pathname === "/authorize" && req.method === "GET") return this.authorize(url);
    if (url.pathname === "/token" && req.method === "POST") return this.token(req);
    return null;
  }

  private authorize(url: URL): Response {
    const q = url.searchParams;
    this.authorizeRequests.push(q);
    const redirect = q.get("redirect_uri") ?? "";
    if (q.get("client_id") !== this.clientId || q.get("response_type") !== "code" || !/^https?:\/\//.test(redirect)) {
      return new Response("invalid authorization request", { status: 400 });
    }
    const code = random("code");
    this.codes.set(code, { redirectUri: redirect, challenge: q.get("code_challenge") ?? "", scope: q.get("scope") ?? "" });
    const back = new URL(redirect);
    back.searchParams.set("code", code);
    back.searchParams.set("state", q.get("state") ?? "");
    return new Response(null, { status: 302, headers: { location: back.href } });
  }

  private async token(req: Request): Promise<Response> {
    const form = new URLSearchParams(await req.text());
    const error = (status: number, code: string) => Response.json({ error: code }, { status });
    if (form.get("client_id") !== this.clientId || form.get("client_secret") !== this.clientSecret) return error(401, "invalid_client");
    const grant = form.get("grant_type");
    if (grant === "authorization_code") {
      const pending = this.codes.get(form.get("code") ?? "");
      if (!pending) return error(400, "invalid_grant");
      this.codes.delete(form.get("code")!);
      if (pending.redirectUri !== form.get("redirect_uri")) return error(400, "invalid_grant");
      const verifier = form.get("code_verifier") ?? "";
      if (pending.challenge && createHash("sha256").update(verifier).digest("base64url") !== pending.challenge) return error(400, "invalid_grant");
      this.grants.push(grant);
      return Response.json(this.issue(true));
    }
    if (grant === "refresh_token") {
      const refresh = form.get("refresh_token") ?? "";
      if (!this.refreshTokens.has(refresh)) return error(400, "invalid_grant");
      if (this.opts.rotateRefreshTokens) this.refreshTokens.delete(refresh);
      this.grants.push(grant);
      return Response.json(this.issue(!!this.opts.rotateRefreshTokens));
    }
    return error(400, "unsupported_grant_type");
  }

  private issue(withRefresh: boolean) {
    const expiresIn = this.opts.expiresInSeconds ?? 3600;
    const access = random("access");
    this.accessTokens.set(access, Date.now() + expiresIn * 1000);
    const body: Record<string, unknown> = { access_token: access, token_type: "bearer", expires_in: expiresIn };
    if (withRefresh) {
      const refresh = random("refresh");
      this.refreshTokens.add(refresh);
      body.refresh_token = refresh;
    }
    return body;
  }

  /** A token as rclone would store it, issued without the browser dance (driver tests). */
  tokenJson(opts: { expiredLocally?: boolean } = {}): string {
    const issued = this.issue(true) as { access_token: string; refresh_token: string };
    const expiry = new Date(Date.now() + (opts.expiredLocally ? -60_000 : 3_600_000));
    return JSON.stringify({ access_token: issued.access_token, token_type: "Bearer", refresh_token: issued.refresh_token, expiry: expiry.toISOString() });
  }

  /** Makes every access token issued so far invalid (the API answers 401 until the client refreshes). */
  expireAccessTokens(): void {
    this.accessTokens.clear();
  }

  /** Revokes every refresh token (a refresh then fails with invalid_grant). */
  revokeRefreshTokens(): void {
    this.refreshTokens.clear();
  }

  isValidRefreshToken(token: string): boolean {
    return this.refreshTokens.has(token);
  }

  /** Whether the request carries a live access token. */
  authorized(req: Request): boolean {
    const m = /^Bearer (\S+)$/.exec(req.headers.get("authorization") ?? "");
    const expiry = m ? this.accessTokens.get(m[1]!) : undefined;
    return expiry !== undefined && expiry > Date.now();
  }
}

/** Runs a fake on a random loopback port. */
export function serveFake(handler: (req: Request, url: URL) => Promise<Response>) {
  return Bun.serve({
    port: 0,
    hostname: "127.0.0.1",
    maxRequestBodySize: 256 * 1024 * 1024,
    async fetch(req) {
      return handler(req, new URL(req.url));
    },
  });
}

/** Parses `Range: bytes=a-b` against a size; null = whole body, "invalid" = 416. */
export function parseRange(header: string | null, size: number): { start: number; end: number } | null | "invalid" {
  if (!header) return null;
  const m = /^bytes=(\d+)-(\d*)$/.exec(header.trim());
  if (!m) return "invalid";
  const start = Number(m[1]);
  const end = m[2] === "" ? size - 1 : Math.min(Number(m[2]), size - 1);
  if (start >= size || start > end) return "invalid";
  return { start, end };
}

/** A 200 or 206 answer for `bytes` honouring Range. */
export function rangedResponse(req: Request, bytes: Uint8Array, headers: Record<string, string> = {}): Response {
  const range = parseRange(req.headers.get("range"), bytes.byteLength);
  if (range === "invalid") return new Response(null, { status: 416, headers: { "content-range": `bytes */${bytes.byteLength}` } });
  if (!range) return new Response(bytes as Uint8Array<ArrayBuffer>, { headers: { ...headers, "content-length": String(bytes.byteLength) } });
  return new Response(bytes.slice(range.start, range.end + 1) as Uint8Array<ArrayBuffer>, {
    status: 206,
    headers: { ...headers, "content-range": `bytes ${range.start}-${range.end}/${bytes.byteLength}` },
  });
}

/** A channel config for an OAuth fake: its app credentials, a token it issued, its token endpoint. */
export const oauthAppConfig = (fake: { oauth: FakeOAuth; origin: string }, token = fake.oauth.tokenJson()) => ({
  client_id: fake.oauth.clientId,
  client_secret: fake.oauth.clientSecret,
  token,
  token_url: `${fake.origin}/token`,
});
