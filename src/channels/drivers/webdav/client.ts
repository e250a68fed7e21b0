import { networkError } from "../driver-errors";
import { fetchWithTimeout, sendWithRetry, type FetchLike, type HttpBody } from "../http-transport";
import type { WebdavSettings } from "./config";
import { WebdavRequestError } from "./errors";

export interface DavCall {
  method: "GET" | "PUT" | "DELETE" | "PROPFIND" | "MKCOL";
  url: string;
  /** Shown in errors instead of the URL: the key, or a directory relative to the configured base (never the url or path). */
  target: string;
  headers?: Record<string, string>;
  body?: HttpBody;
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
    const response = await sendWithRetry(
      call,
      (c) => this.sendOnce(c),
      (err) => networkError(err, "WebDAV"),
    );
    if ((response.status >= 200 && response.status < 300) || call.accept?.includes(response.status)) return response;
    await response.body?.cancel().catch(() => {});
    throw new WebdavRequestError(call.method, response.status, call.target);
  }

  private async sendOnce(call: DavCall): Promise<Response> {
    const headers = new Headers(call.headers);
    if (this.settings.authorization) headers.set("Authorization", this.settings.authorization);
    // rclone sends the endpoint as Referer; some servers' CSRF checks expect one.
    headers.set("Referer", this.settings.endpoint.href);
    // Ranged reads must see raw bytes; a transparently decompressed body would not match the range.
    if (call.method === "GET") headers.set("Accept-Encoding", "identity");
    // Redirects are not followed (fetchWithTimeout): one could hand our Authorization to another host.
    return fetchWithTimeout(this.fetchFn, call.url, { method: call.method, headers, body: call.body }, call.timeoutMs);
  }
}
