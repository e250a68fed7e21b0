import { lookup } from "node:dns/promises";
import { open, rm } from "node:fs/promises";
import { isIP } from "node:net";
import type { AddressSet } from "./cidr";
import { refusalReason } from "./public-address";
import { writeAll } from "../shared/write-all";
import { isDiskFull } from "../errors";

/**
 * SSRF-safe download of a user-supplied URL into a file (admin "import image from URL").
 *
 * Every hop (the URL and each redirect target) is resolved by us, every resolved
 * address must be public (or inside `allow`), and the request is then sent to that
 * IP literal with the original Host header and TLS server name. Bun's fetch never
 * sees a hostname, so it cannot resolve it a second time: a DNS answer that changes
 * between check and connect (DNS rebinding) has nothing to act on.
 */

export type UrlImportErrorCode =
  | "bad_url" // not a URL, wrong scheme, credentials in it, bad redirect target
  | "refused_address" // resolves to a non-public address
  | "dns_failed"
  | "too_many_redirects"
  | "upstream_status" // upstream answered with a non-2xx status
  | "network" // connection refused/reset, TLS failure
  | "timeout"
  | "aborted" // the caller's signal fired
  | "too_large";

/**
 * `status` is what the HTTP endpoint should answer. 413 when the body exceeds the
 * upload cap (same as a direct upload); 400 for everything else: the spec's common
 * statuses define 400 as "invalid body or parameters", and a URL that cannot be
 * fetched is a bad parameter. 422 is taken (pixel budget), 408 means the *client*
 * was slow and makes browsers retry automatically, and 5xx would blame our server.
 * `message` is Chinese, safe to show, and never contains resolved addresses
 * (that would let callers map internal DNS).
 */
export class UrlImportError extends Error {
  constructor(
    readonly status: 400 | 413,
    readonly code: UrlImportErrorCode,
    message: string,
  ) {
    super(message);
    this.name = "UrlImportError";
  }
}

export interface FetchToFileOptions {
  maxBytes: number;
  /** Whole operation, all hops and the body included. Default 60 s. */
  timeoutMs?: number;
  /** Per hop: DNS + connect + TLS + response headers. Default 10 s. */
  connectTimeoutMs?: number;
  /** Redirects followed at most; one more is refused. Default 5. */
  maxRedirects?: number;
  /** Host name to addresses. Default: the OS resolver (getaddrinfo, all families). */
  resolve?: (host: string) => Promise<string[]>;
  /** Extra networks that count as allowed (KURA_IMPORT_ALLOW: intranet setups, tests). */
  allow?: AddressSet;
  /** File name overriding the one inferred from the URL (the request's `file_name`). */
  fileName?: string;
  /** PEM CA certificates replacing the system trust store (private PKI, tests). */
  ca?: string;
  signal?: AbortSignal;
}

export interface FetchToFileResult {
  bytes: number;
  finalUrl: string;
  contentType: string | null;
  suggestedName: string;
}

const REDIRECTS = new Set([301, 302, 303, 307, 308]);
const FALLBACK_NAME = "image";

const fail = {
  badUrl: () => new UrlImportError(400, "bad_url", "URL 无效，只支持 http 或 https 地址"),
  credentials: () => new UrlImportError(400, "bad_url", "URL 不能包含用户名或密码"),
  badRedirect: () => new UrlImportError(400, "bad_url", "上游返回了无效的重定向地址"),
  refused: () => new UrlImportError(400, "refused_address", "URL 指向的不是公网地址，已拒绝"),
  dns: () => new UrlImportError(400, "dns_failed", "无法解析 URL 中的主机名"),
  redirects: (max: number) => new UrlImportError(400, "too_many_redirects", `重定向次数过多（最多 ${max} 次）`),
  status: (code: number) => new UrlImportError(400, "upstream_status", `上游服务器返回了状态码 ${code}`),
  network: () => new UrlImportError(400, "network", "无法从该 URL 下载文件"),
  timeout: () => new UrlImportError(400, "timeout", "从该 URL 下载超时"),
  aborted: () => new UrlImportError(400, "aborted", "下载已取消"),
  tooLarge: () => new UrlImportError(413, "too_large", "文件超过上传大小上限"),
};

export async function fetchToFile(url: string, destPath: string, opts: FetchToFileOptions): Promise<FetchToFileResult> {
  const maxRedirects = opts.maxRedirects ?? 5;
  const resolve = opts.resolve ?? resolveWithOs;
  const whole = new AbortController();
  let timedOut = false;
  const expire = () => {
    timedOut = true;
    whole.abort();
  };
  const totalTimer = setTimeout(expire, opts.timeoutMs ?? 60_000);
  const onCallerAbort = () => whole.abort();
  opts.signal?.addEventListener("abort", onCallerAbort, { once: true });
  if (opts.signal?.aborted) whole.abort();
  let fileOpened = false;
  try {
    const original = parseTarget(url, fail.badUrl);
    let current = original;
    for (let redirects = 0; ; redirects++) {
      const hop = new AbortController();
      const hopTimer = setTimeout(() => {
        timedOut = true;
        hop.abort();
      }, opts.connectTimeoutMs ?? 10_000);
      let res: Response;
      try {
        const signal = AbortSignal.any([whole.signal, hop.signal]);
        const address = await checkedAddress(current.hostname, resolve, opts.allow, signal);
        res = await pinnedGet(current, address, signal, opts.ca);
      } finally {
        clearTimeout(hopTimer);
      }
      if (REDIRECTS.has(res.status)) {
        discard(res);
        if (redirects >= maxRedirects) throw fail.redirects(maxRedirects);
        const location = res.headers.get("location");
        if (!location) throw fail.badRedirect();
        current = parseTarget(location, fail.badRedirect, current);
        continue;
      }
      if (res.status < 200 || res.status > 299) {
        discard(res);
        throw fail.status(res.status);
      }
      const declared = Number(res.headers.get("content-length"));
      if (Number.isFinite(declared) && declared > opts.maxBytes) {
        discard(res);
        throw fail.tooLarge();
      }
      fileOpened = true;
      const bytes = await streamToFile(res, destPath, opts.maxBytes);
      const suggestedName =
        (opts.fileName !== undefined ? sanitizeFileName(opts.fileName) : null) ??
        fileNameFromUrl(original.href) ??
        fileNameFromUrl(current.href) ??
        FALLBACK_NAME;
      return { bytes, finalUrl: current.href, contentType: res.headers.get("content-type"), suggestedName };
    }
  } catch (err) {
    if (fileOpened) await rm(destPath, { force: true });
    if (err instanceof UrlImportError) throw err;
    // Our own disk is full, not the remote's fault: the disk-full 503 (Retry-After, logged).
    if (isDiskFull(err)) throw err;
    if (timedOut) throw fail.timeout();
    if (opts.signal?.aborted) throw fail.aborted();
    throw fail.network();
  } finally {
    clearTimeout(totalTimer);
    opts.signal?.removeEventListener("abort", onCallerAbort);
    whole.abort(); // tears down any connection still open (e.g. a refused body)
  }
}

function parseTarget(raw: string, error: () => UrlImportError, base?: URL): URL {
  let u: URL;
  try {
    u = new URL(raw, base);
  } catch {
    throw error();
  }
  if (u.protocol !== "http:" && u.protocol !== "https:") throw error();
  if (u.username || u.password) throw fail.credentials();
  return u;
}

/**
 * Resolves the host (unless it is an IP literal) and returns the address to pin. The one
 * public-address policy for every outbound request a user or admin chooses the target of
 * (URL import, alert webhook).
 */
export async function checkedAddress(
  hostname: string,
  resolve: (host: string) => Promise<string[]>,
  allow: AddressSet | undefined,
  signal: AbortSignal,
): Promise<string> {
  const literal = hostname.startsWith("[") ? hostname.slice(1, -1) : hostname;
  let addresses: string[];
  if (isIP(literal)) {
    addresses = [literal];
  } else {
    try {
      addresses = await abortable(() => resolve(hostname), signal);
    } catch (err) {
      if (signal.aborted) throw err;
      throw fail.dns();
    }
  }
  if (addresses.length === 0) throw fail.dns();
  // Every answer must pass, not just the one we pick: a name that mixes a public
  // and a private address is treated as hostile.
  for (const a of addresses) {
    if (!isIP(a)) throw fail.dns();
    if (refusalReason(a) !== null && !allow?.has(a)) throw fail.refused();
  }
  return addresses[0]!;
}

function pinnedGet(target: URL, address: string, signal: AbortSignal, ca: string | undefined): Promise<Response> {
  return pinnedRequest(target, address, {
    method: "GET",
    signal,
    ca,
    headers: {
      "user-agent": "Kura-URL-Import/1",
      accept: "image/*, */*;q=0.5",
      // Images are already compressed; asking for identity keeps the byte count
      // honest (a server that compresses anyway is decoded by decodedBody, and the
      // cap then applies to the decoded bytes).
      "accept-encoding": "identity",
    },
  });
}

/**
 * One request sent to the checked IP literal with the original Host header and TLS server
 * name, never following redirects (the caller checks each target itself, or refuses them).
 */
export function pinnedRequest(
  target: URL,
  address: string,
  init: { method: string; headers: Record<string, string>; body?: string; signal: AbortSignal; ca?: string },
): Promise<Response> {
  const ipHost = isIP(address) === 6 ? `[${address}]` : address;
  const pinned = `${target.protocol}//${ipHost}${target.port ? `:${target.port}` : ""}${target.pathname}${target.search}`;
  const literal = isIP(target.hostname.replace(/^\[|\]$/g, "")) !== 0;
  return fetch(pinned, {
    method: init.method,
    redirect: "manual",
    keepalive: false, // no pooled socket shared across host names
    signal: init.signal,
    headers: { ...init.headers, host: target.host },
    body: init.body,
    // Bun's own decoding prints "Decompression error: ZlibError" to stderr, outside the log's
    // format and in English, for a body that does not decode: the import decodes itself
    // (decodedBody), the webhook never reads the answer.
    decompress: false,
    // SNI and certificate verification use the host name, not the pinned IP.
    tls: { ...(literal ? {} : { serverName: target.hostname }), ...(init.ca ? { ca: init.ca } : {}) },
  });
}

/** Content codings a server may use despite `accept-encoding: identity`, as DecompressionStream names them. */
const DECODERS: Record<string, string> = { gzip: "gzip", "x-gzip": "gzip", deflate: "deflate", br: "brotli", zstd: "zstd" };

/** The body with its content coding undone, as fetch would have done it; an unknown coding stays as sent. */
function decodedBody(res: Response): ReadableStream<Uint8Array> | null {
  const coding = res.headers.get("content-encoding")?.trim().toLowerCase() ?? "";
  const format = DECODERS[coding];
  if (!res.body || !format) return res.body;
  return res.body.pipeThrough(new DecompressionStream(format as CompressionFormat));
}

/** Writes the (decoded) body chunk by chunk; fails as soon as the cap is passed. */
async function streamToFile(res: Response, destPath: string, maxBytes: number): Promise<number> {
  const file = await open(destPath, "w");
  let bytes = 0;
  try {
    const body = decodedBody(res);
    if (!body) return 0;
    const reader = body.getReader();
    for (;;) {
      const { done, value } = await reader.read();
      if (done) return bytes;
      bytes += value.byteLength;
      if (bytes > maxBytes) {
        reader.cancel().catch(() => {});
        throw fail.tooLarge();
      }
      // Awaiting each write is the backpressure: we never read faster than disk.
      await writeAll(file, value);
    }
  } finally {
    await file.close();
  }
}

function discard(res: Response): void {
  res.body?.cancel().catch(() => {});
}

/** `start()`'s promise, or a rejection as soon as `signal` fires; `start` is not called at all once it has. */
function abortable<T>(start: () => Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) return Promise.reject(new Error("aborted"));
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(new Error("aborted"));
    signal.addEventListener("abort", onAbort, { once: true });
    start()
      .then(resolve, reject)
      .finally(() => signal.removeEventListener("abort", onAbort));
  });
}

export async function resolveWithOs(host: string): Promise<string[]> {
  const answers = await lookup(host, { all: true, verbatim: true });
  return answers.map((a) => a.address);
}

/** Name from the URL's last path segment (percent-decoded, sanitized), or null. */
export function fileNameFromUrl(url: string): string | null {
  let path: string;
  try {
    path = new URL(url).pathname;
  } catch {
    return null;
  }
  const segment = path.slice(path.lastIndexOf("/") + 1);
  let decoded = segment;
  try {
    decoded = decodeURIComponent(segment);
  } catch {
    // malformed escape: keep the raw text rather than fail the import
  }
  return sanitizeFileName(decoded);
}

/**
 * A client's file name without control or bidi-override characters (NFC): a NUL or newline broke
 * searches and logs, and U+202E showed `gnp.exe` as `exe.png` in the console. Kept otherwise as
 * sent (an uploaded name is metadata the user chose).
 */
export function withoutControls(raw: string): string {
  return raw.normalize("NFC").replace(/[\u0000-\u001f\u007f-\u009f\u200e\u200f\u202a-\u202e\u2066-\u2069]/g, "");
}

/**
 * Makes a name safe to store and to offer in Content-Disposition: no path
 * separators, control or bidi-override characters, no leading dots (hidden
 * files, ".."), at most 200 UTF-8 bytes with the extension kept. Null if nothing is left.
 */
export function sanitizeFileName(raw: string): string | null {
  let name = withoutControls(raw)
    .replace(/[\\/:*?"<>|]/g, "_")
    .replace(/^[.\s]+|[.\s]+$/g, "");
  const encoder = new TextEncoder();
  if (encoder.encode(name).length > 200) {
    const dot = name.lastIndexOf(".");
    const ext = dot > 0 && name.length - dot <= 16 ? name.slice(dot) : "";
    let stem = "";
    let budget = 200 - encoder.encode(ext).length;
    for (const ch of name.slice(0, name.length - ext.length)) {
      budget -= encoder.encode(ch).length;
      if (budget < 0) break;
      stem += ch;
    }
    name = stem + ext;
  }
  return name || null;
}
