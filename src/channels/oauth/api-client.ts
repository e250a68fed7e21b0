/**
 * Authorized requests to an OAuth provider's API. Every body is replayable
 * (drivers buffer uploads chunk by chunk, as rclone does), so a 401 can always
 * be answered by refreshing the token and sending the request again, and
 * throttling (429) and 5xx answers are retried a couple of times.
 */
import { readBoundedText, readTextPrefix } from "../../shared/bounded-read";
import { ANSWER_MAX_BYTES, answerTooLarge, bodyReadError, ERROR_PREFIX_BYTES } from "../drivers/driver-errors";
import { fetchWithTimeout } from "../drivers/http-transport";
import { ApiRequestError, networkError, OAuthError } from "./errors";
import { authorizationHeader } from "./token";
import type { FetchLike, TokenSource } from "./token-source";

export interface ApiCall {
  method: "GET" | "POST" | "PUT" | "PATCH" | "DELETE";
  url: string;
  /** Shown in errors instead of the URL (object key or API name). */
  target: string;
  headers?: Record<string, string>;
  body?: Uint8Array | string;
  /** Statuses that are answers, not errors (e.g. 404 on DELETE, 302 to a download URL, 308 resume). */
  accept?: number[];
  /** false for pre-authenticated URLs (upload sessions, download links) that must not see the token. */
  auth?: boolean;
  timeoutMs?: number;
}

export interface ApiClientOptions {
  label: string;
  tokens: TokenSource;
  fetch: FetchLike;
  /** Extracts the provider's error code from an error body (never its free text). */
  errorCode: (body: unknown) => string;
  timeoutMs?: number;
}

const RETRY_STATUSES = new Set([429, 500, 502, 503, 504]);
const MAX_ATTEMPTS = 3;

export class OAuthApiClient {
  readonly label: string;
  private readonly timeoutMs: number;

  constructor(private readonly opts: ApiClientOptions) {
    this.label = opts.label;
    this.timeoutMs = opts.timeoutMs ?? 60_000;
  }

  async send(call: ApiCall): Promise<Response> {
    let token = call.auth === false ? null : await this.opts.tokens.current();
    let refreshed = false;
    for (let attempt = 1; ; attempt++) {
      const response = await this.once(call, token ? authorizationHeader(token) : null);
      if ((response.status >= 200 && response.status < 300) || call.accept?.includes(response.status)) return response;
      if (response.status === 401 && token && !refreshed) {
        await response.body?.cancel().catch(() => {});
        token = await this.opts.tokens.afterRejection(token);
        refreshed = true;
        continue;
      }
      if (RETRY_STATUSES.has(response.status) && attempt < MAX_ATTEMPTS) {
        await response.body?.cancel().catch(() => {});
        await Bun.sleep(retryDelay(response, attempt));
        continue;
      }
      throw await this.failure(call, response);
    }
  }

  /** Sends a JSON body and parses the JSON answer. */
  async json<T>(call: Omit<ApiCall, "body"> & { body?: unknown }): Promise<T> {
    const headers: Record<string, string> = { accept: "application/json", ...call.headers };
    const body = call.body === undefined ? undefined : JSON.stringify(call.body);
    if (body !== undefined) headers["content-type"] = "application/json";
    return readApiJson<T>(await this.send({ ...call, headers, body }), this.label);
  }

  /** The JSON of an answer `send` returned, bounded (see readApiJson). */
  readJson<T>(response: Response): Promise<T> {
    return readApiJson<T>(response, this.label);
  }

  /** The error for an unexpected answer; reads the body only for the provider's error code. */
  async failure(call: Pick<ApiCall, "method" | "target">, response: Response): Promise<ApiRequestError> {
    let body: unknown;
    try {
      // Only the error code near the start is wanted: a 64 KiB prefix, the rest cancelled.
      body = JSON.parse(await readTextPrefix(response, ERROR_PREFIX_BYTES));
    } catch {
      body = undefined;
    }
    return new ApiRequestError(this.label, call.method, response.status, call.target, this.opts.errorCode(body));
  }

  private async once(call: ApiCall, authorization: string | null): Promise<Response> {
    const headers = new Headers(call.headers);
    if (authorization) headers.set("authorization", authorization);
    // Ranged reads must see raw bytes; a transparently decompressed body would not match the range.
    if (call.method === "GET") headers.set("accept-encoding", "identity");
    try {
      // The deadline covers the wait for headers and each silence in the body, not the whole
      // download: a large file on a slow link may take longer than one timeout to arrive.
      // Redirects are not followed (a redirect could carry the token to another host); drivers
      // follow the ones they expect themselves.
      return await fetchWithTimeout(this.opts.fetch, call.url, { method: call.method, headers, body: call.body }, call.timeoutMs ?? this.timeoutMs);
    } catch (err) {
      throw networkError(err, this.label);
    }
  }
}

/**
 * The JSON of an API answer, read to at most ANSWER_MAX_BYTES (the provider, or a proxy in front
 * of it, chooses how much it sends); a cut-off or non-JSON body is a Chinese error, not the
 * runtime's parse message.
 */
export async function readApiJson<T>(response: Response, label: string): Promise<T> {
  const text = await readBoundedText(response, ANSWER_MAX_BYTES, answerTooLarge(`${label} 接口`, ANSWER_MAX_BYTES)).catch((err) => {
    throw bodyReadError(err, label);
  });
  try {
    return JSON.parse(text) as T;
  } catch {
    throw new OAuthError(`${label} 接口的响应不是有效的 JSON（可能被截断）`);
  }
}

/** Retry-After when the provider sent one (capped), else a short backoff. */
function retryDelay(response: Response, attempt: number): number {
  const after = Number(response.headers.get("retry-after"));
  if (Number.isFinite(after) && after >= 0) return Math.min(after * 1000, 5000);
  return 250 * 2 ** (attempt - 1);
}
