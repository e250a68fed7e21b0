/**
 * The request plumbing the HTTP drivers (S3, WebDAV) share: one fetch with a
 * header timeout, and a send loop that retries a connection failure once when
 * the body can be sent again. What a status means stays with each driver.
 */
import { withIdleDeadline } from "../../shared/idle-deadline";
import { mapStreamErrors } from "../../shared/mapped-stream";

/** `fetch` or anything call-compatible (e.g. an SSRF-guarded fetch). */
export type FetchLike = (input: string | URL | Request, init?: RequestInit) => Promise<Response>;

export type HttpBody = ReadableStream<Uint8Array> | Uint8Array | string;

/** Options every HTTP driver takes. */
export interface HttpDriverOptions {
  fetch?: FetchLike;
  /** Time allowed until response headers arrive (uploads get extra time by size). */
  timeoutMs?: number;
}

/**
 * Sends `call` with `sendOnce` and returns the response, whatever its status.
 * A transport failure is retried once unless the body is a stream, then turned
 * into a safe error by `networkFailure`.
 */
export async function sendWithRetry<C extends { body?: HttpBody }>(
  call: C,
  sendOnce: (call: C) => Promise<Response>,
  networkFailure: (err: unknown) => Error,
): Promise<Response> {
  // A stream can be read only once; anything else is safe to send again after a
  // connection failure (e.g. a pooled keep-alive socket the server has closed).
  const attempts = call.body instanceof ReadableStream ? 1 : 2;
  // When the upload's own source fails (client went away, size mismatch), fetch
  // rejects with that error; report it as such, not as a connection problem.
  const tap = call.body instanceof ReadableStream ? tapErrors(call.body) : null;
  if (tap) call = { ...call, body: tap.stream };
  for (let attempt = 1; ; attempt++) {
    try {
      return await sendOnce(call);
    } catch (err) {
      if (tap?.failure) throw tap.failure.error;
      if (attempt < attempts) continue;
      throw networkFailure(err);
    }
  }
}

/**
 * One fetch with two deadlines: `timeoutMs` until the response headers arrive, then at most
 * `timeoutMs` of silence between two pieces of the body. A large download may stream for as
 * long as it takes, but a peer that stops sending mid-body (a dead NAT mapping, a hung
 * server) fails the read instead of holding a delivery, a job or a health round for good.
 */
export async function fetchWithTimeout(
  fetchFn: FetchLike,
  url: string,
  request: { method: string; headers: Headers; body?: HttpBody },
  timeoutMs: number,
): Promise<Response> {
  const controller = new AbortController();
  const timer = setTimeout(() => controller.abort(new DOMException("timeout", "TimeoutError")), timeoutMs);
  let response: Response;
  try {
    response = await fetchFn(url, {
      method: request.method,
      headers: request.headers,
      body: request.body as BodyInit | undefined,
      signal: controller.signal,
      // Following a redirect could hand our credentials to another host: report it instead.
      redirect: "manual",
      duplex: "half",
      // Ranged reads must see raw bytes; a transparently decompressed body would not match the range.
      decompress: false,
    } as RequestInit);
  } finally {
    clearTimeout(timer);
  }
  return withBodyIdleTimeout(response, timeoutMs);
}

export class BodyStalledError extends Error {
  constructor(idleMs: number) {
    super(`读取响应超时：${idleMs / 1000} 秒未收到数据`);
    this.name = "BodyStalledError";
  }
}

/**
 * The same response, whose body fails with BodyStalledError (and cancels the peer's body, closing
 * its socket) when no piece arrives within `idleMs` of being asked for. A consumer that is
 * slow itself is not timed: the clock runs only while a read is waiting on the peer.
 */
export function withBodyIdleTimeout(response: Response, idleMs: number): Response {
  // HEAD, 204 and 304 answers have no body at all (fetch gives null), so nothing to watch.
  if (!response.body) return response;
  // Cancelling the peer's body closes its connection (no socket waits on a dead peer).
  const body = withIdleDeadline(response.body, idleMs, () => new BodyStalledError(idleMs));
  return new Response(body, { status: response.status, statusText: response.statusText, headers: response.headers });
}

/** Passes a stream through unchanged, remembering the error it fails with, if any. */
function tapErrors(source: ReadableStream<Uint8Array>): {
  stream: ReadableStream<Uint8Array>;
  failure: { error: unknown } | null;
} {
  const tap: { stream: ReadableStream<Uint8Array>; failure: { error: unknown } | null } = { stream: source, failure: null };
  tap.stream = mapStreamErrors(source, (error) => {
    tap.failure = { error };
    return error;
  });
  return tap;
}
