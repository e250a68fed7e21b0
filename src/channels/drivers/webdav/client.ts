import type { WebdavSettings } from "./config.ts";
import { networkError, WebdavRequestError } from "./errors.ts";

/** `fetch` or anything call-compatible (e.g. an SSRF-guarded fetch). */
export type FetchLike = (input: string | URL | Request, init?: RequestInit) => Promise<Response>;

export interface DavCall {
  method: "GET" | "PUT" | "DELETE" | "PROPFIND" | "MKCOL";
  url: string;
  /** Shown in errors instead of the URL (the key or directory). */
  target: string;
  headers?: Record<string, string>;
  body?: ReadableStream<Uint8Array> | Uint8Array | string;
  /** Statuses that are not errors for this call (e.g. 404 on DELETE). */
  accept?: number[];
  /** Time allowed until response headers arrive. */
  timeoutMs: number;
}

/** Sends WebDAV requests with the configured credentials; failures become safe Chinese errors. */
export class DavClient {
  constructor(
    private readonly settings: WebdavSettings,
    private readonly fetchFn: FetchLike,
  ) {}

  async send(call: DavCall): Promise<Response> {
    // A stream can be read only once; anything else is safe to send again after a
    // connection failure (e.g. a pooled keep-alive socket the server has closed).
    const attempts = call.body instanceof ReadableStream ? 1 : 2;
    // When the upload's own source fails (size mismatch, client went away), fetch
    // rejects with that error: report it as such, not as a connection problem.
    const tap = call.body instanceof ReadableStream ? tapErrors(call.body) : null;
    if (tap) call = { ...call, body: tap.stream };
    for (let attempt = 1; ; attempt++) {
      let response: Response;
      try {
        response = await this.sendOnce(call);
      } catch (err) {
        if (tap?.failure) throw tap.failure.error;
        if (attempt < attempts) continue;
        throw networkError(err, this.settings.display);
      }
      if ((response.status >= 200 && response.status < 300) || call.accept?.includes(response.status)) return response;
      await response.body?.cancel().catch(() => {});
      throw new WebdavRequestError(call.method, response.status, call.target);
    }
  }

  private async sendOnce(call: DavCall): Promise<Response> {
    const headers = new Headers(call.headers);
    if (this.settings.authorization) headers.set("Authorization", this.settings.authorization);
    // rclone sends the endpoint as Referer; some servers' CSRF checks expect one.
    headers.set("Referer", this.settings.endpoint.href);
    // Ranged reads must see raw bytes; a transparently decompressed body would not match the range.
    if (call.method === "GET") headers.set("Accept-Encoding", "identity");
    const controller = new AbortController();
    const timer = setTimeout(() => controller.abort(new DOMException("timeout", "TimeoutError")), call.timeoutMs);
    try {
      return await this.fetchFn(call.url, {
        method: call.method,
        headers,
        body: call.body as BodyInit | undefined,
        signal: controller.signal,
        // Following a redirect could hand our Authorization to another host: report it instead.
        redirect: "manual",
        duplex: "half",
        decompress: false,
      } as RequestInit);
    } finally {
      clearTimeout(timer);
    }
  }
}

/** Passes a stream through unchanged, remembering the error it fails with, if any. */
function tapErrors(source: ReadableStream<Uint8Array>): {
  stream: ReadableStream<Uint8Array>;
  failure: { error: unknown } | null;
} {
  const reader = source.getReader();
  const tap = {
    failure: null as { error: unknown } | null,
    stream: new ReadableStream<Uint8Array>({
      async pull(controller) {
        try {
          const { done, value } = await reader.read();
          if (done) controller.close();
          else controller.enqueue(value);
        } catch (error) {
          tap.failure = { error };
          controller.error(error);
        }
      },
      cancel(reason) {
        return reader.cancel(reason);
      },
    }),
  };
  return tap;
}
