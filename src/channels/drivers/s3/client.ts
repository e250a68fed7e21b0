import aws4 from "aws4";
import { networkError } from "../driver-errors";
import { fetchWithTimeout, sendWithRetry, type FetchLike, type HttpBody } from "../http-transport";
import type { S3Settings } from "./config";
import { errorFromResponse } from "./errors";

export interface S3Call {
  method: "GET" | "PUT" | "HEAD" | "DELETE";
  /** Full key inside the bucket (prefix already applied); absent = the bucket itself. */
  key?: string;
  query?: Record<string, string>;
  headers?: Record<string, string>;
  /**
   * A stream is sent as-is with `UNSIGNED-PAYLOAD` (the caller sets Content-Length),
   * so uploads never have to be buffered to be hashed. Small fixed bodies are hashed.
   */
  body?: HttpBody;
  /** Statuses that are not errors for this call (e.g. 404 on HEAD). */
  accept?: number[];
  /** Time allowed until response headers arrive. */
  timeoutMs?: number;
}

/** RFC 3986 encoding of one path segment, as S3's canonical request wants it ('+' → %2B). */
export function encodeSegment(segment: string): string {
  return encodeURIComponent(segment).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);
}

export function encodeKeyPath(key: string): string {
  return key.split("/").map(encodeSegment).join("/");
}

const DEFAULT_TIMEOUT_MS = 30_000;

/** Signs (SigV4 via aws4) and sends one S3 request; returns the response or throws a safe error. */
export class S3Client {
  constructor(
    private readonly settings: S3Settings,
    private readonly fetchFn: FetchLike,
  ) {}

  async send(call: S3Call): Promise<Response> {
    const response = await sendWithRetry(
      call,
      (c) => this.sendOnce(c),
      (err) => networkError(err, "S3"),
    );
    if (response.ok || call.accept?.includes(response.status)) return response;
    throw await errorFromResponse(response);
  }

  private async sendOnce(call: S3Call): Promise<Response> {
    const s = this.settings;
    const endpoint = new URL(s.origin);
    const host = s.pathStyle ? endpoint.host : `${s.bucket}.${endpoint.host}`;
    const keyPath = call.key === undefined ? "" : `/${encodeKeyPath(call.key)}`;
    let path = s.pathStyle ? `${s.basePath}/${encodeSegment(s.bucket)}${keyPath}` : `${s.basePath}${keyPath || "/"}`;
    const query = Object.entries(call.query ?? {})
      .map(([k, v]) => `${encodeSegment(k)}=${encodeSegment(v)}`)
      .join("&");
    if (query) path += `?${query}`;

    const headers: Record<string, string> = { ...call.headers };
    const body = call.body;
    if (body instanceof ReadableStream) {
      headers["X-Amz-Content-Sha256"] = "UNSIGNED-PAYLOAD";
    } else if (body !== undefined) {
      const bytes = typeof body === "string" ? new TextEncoder().encode(body) : body;
      headers["X-Amz-Content-Sha256"] = new Bun.CryptoHasher("sha256").update(bytes).digest("hex");
      headers["Content-Length"] = String(bytes.byteLength);
    }
    // Ranged reads must see raw bytes; a transparently decompressed body would not match the range.
    if (call.method === "GET") headers["Accept-Encoding"] = "identity";

    const signed = aws4.sign(
      { method: call.method, host, path, headers, service: "s3", region: s.region, doNotModifyHeaders: false },
      {
        accessKeyId: s.accessKeyId,
        secretAccessKey: s.secretAccessKey,
        ...(s.sessionToken ? { sessionToken: s.sessionToken } : {}),
      },
    );
    const sendHeaders = new Headers();
    for (const [name, value] of Object.entries(signed.headers ?? {})) {
      if (name.toLowerCase() !== "host" && value !== undefined) sendHeaders.set(name, String(value));
    }

    return fetchWithTimeout(
      this.fetchFn,
      `${endpoint.protocol}//${host}${signed.path}`,
      { method: call.method, headers: sendHeaders, body },
      call.timeoutMs ?? DEFAULT_TIMEOUT_MS,
    );
  }
}
