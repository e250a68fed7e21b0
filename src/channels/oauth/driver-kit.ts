import { roundTripProbe as sharedRoundTripProbe } from "../drivers/round-trip-probe";
/**
 * What the three OAuth drivers share: options every one of them takes, the
 * rclone options they all have (client_id, client_secret, token, auth_url,
 * token_url), the `path` root, rclone's size syntax, and the prefix walk.
 */
import type { Driver, ObjectInfo } from "../driver";
import { assertSafeRootPath } from "../drivers/object-key";
import type { DriverOptionSpec } from "../drivers/option-spec";
import { OAuthApiClient } from "./api-client";
import { OAuthError } from "./errors";
import { checkEndpointUrl, providerEndpoints, type OAuthDriverKind } from "./providers";
import { parseToken } from "./token";
import { TokenSource, type FetchLike } from "./token-source";

export interface OAuthDriverOptions {
  /** Replaces the provider's API origin (tests against a local fake; see providers.ts). */
  apiBase?: string | null;
  /** Called with the new token JSON (rclone form) whenever the access token was refreshed. */
  onTokenRefreshed?: (tokenJson: string) => void;
  fetch?: FetchLike;
  timeoutMs?: number;
}

/** rclone's shared OAuth options; client credentials and the token are secrets. */
export const OAUTH_OPTION_SPECS: readonly DriverOptionSpec[] = [
  { key: "client_id", type: "text", required: false, sensitive: true },
  { key: "client_secret", type: "password", required: false, sensitive: true },
  { key: "token", type: "password", required: true, sensitive: true },
  { key: "auth_url", type: "text", required: false, sensitive: false },
  { key: "token_url", type: "text", required: false, sensitive: false },
];

export const PATH_OPTION: DriverOptionSpec = { key: "path", type: "text", required: false, sensitive: false };

/** The token source and API client of one channel. */
export function oauthClient(
  kind: OAuthDriverKind,
  config: Record<string, string>,
  opts: OAuthDriverOptions,
  errorCode: (body: unknown) => string,
): OAuthApiClient {
  const endpoints = providerEndpoints(kind, config);
  const token = parseToken(config.token, endpoints.label);
  const tokenUrl = checkEndpointUrl(endpoints.tokenUrl, "token_url");
  if (config.auth_url?.trim()) checkEndpointUrl(config.auth_url.trim(), "auth_url");
  const fetchFn = opts.fetch ?? fetch;
  const app = { clientId: config.client_id?.trim() ?? "", clientSecret: config.client_secret ?? "", tokenUrl };
  const tokens = new TokenSource(token, app, endpoints.label, fetchFn, opts.onTokenRefreshed);
  return new OAuthApiClient({ label: endpoints.label, tokens, fetch: fetchFn, errorCode, timeoutMs: opts.timeoutMs });
}

/** Kura's `path` inside the provider: '/'-separated, no leading/trailing '/'; "" = the drive root. */
export function rootOf(config: Record<string, string>, label: string): string {
  const root = (config.path ?? "").trim().replace(/^\/+|\/+$/g, "");
  if (root !== "") assertSafeRootPath(root, label, (message) => new OAuthError(message));
  return root;
}

/** rclone's SizeSuffix: a number with an optional b/k/M/G/T/P suffix (base 1024, "Mi"/"MiB" too); a bare number is KiB. */
export function parseSize(value: string | undefined, key: string, fallback: number): number {
  const v = (value ?? "").trim();
  if (v === "") return fallback;
  const m = /^(\d+(?:\.\d+)?)\s*(?:([kKmMgGtTpP])i?[bB]?|([bB]))?$/.exec(v);
  if (!m) throw new OAuthError(`${key} 格式无效（例如 10M、320k）`);
  const unit = m[3] ? "b" : (m[2] ?? "k").toLowerCase();
  const power = { b: 0, k: 1, m: 2, g: 3, t: 4, p: 5 }[unit as "b" | "k" | "m" | "g" | "t" | "p"];
  return Math.round(Number(m[1]) * 1024 ** power);
}

/** The deepest directory a prefix fully names ("a/b/c" → "a/b"; "a/" → "a"; "abc" → ""). */
export function dirOfPrefix(prefix: string): string {
  return prefix.includes("/") ? prefix.slice(0, prefix.lastIndexOf("/")) : "";
}

/** Whether a walk should descend into directory `dirKey` for `prefix`. */
export function mayHoldPrefix(dirKey: string, prefix: string): boolean {
  return `${dirKey}/`.startsWith(prefix) || prefix.startsWith(`${dirKey}/`);
}

/** Parent of a '/'-separated path ("" at the top). */
export function parentOf(path: string): string {
  const i = path.lastIndexOf("/");
  return i < 0 ? "" : path.slice(0, i);
}

export function baseName(path: string): string {
  return path.slice(path.lastIndexOf("/") + 1);
}

/** The shared deep probe, failing with an OAuthError. */
export function roundTripProbe(driver: Driver, label: string): Promise<void> {
  return sharedRoundTripProbe(driver, label, OAuthError);
}

/** Keys sorted like the other drivers' walks, so listings are stable. */
export function byKey(a: ObjectInfo, b: ObjectInfo): number {
  return a.key < b.key ? -1 : a.key > b.key ? 1 : 0;
}
