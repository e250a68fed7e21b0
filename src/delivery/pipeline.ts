import type { Settings } from "../config/settings-schema";
import { parseSqlTime, sqlTime } from "../db/time";
import type { ImageView } from "../images/repo";
import type { Logger } from "../ops/log";
import { getOrCreate } from "../shared/get-or-create";
import { cacheHeaders, httpDate, type DeliveryArea } from "./cache-headers";
import { ifNoneMatchMatches, ifRangeAllows, notModifiedSince, originalEtag, variantEtag } from "./etag";
import type { PreparedAnswer } from "./hot-answers";
import { chooseRepresentation, formatToMime, type DeliveryFormat } from "./negotiate";
import { parseDeliveryQuery } from "./params";
import { refererAllowed } from "./referer";
import { renderProfile } from "./render-profile";

/**
 * The image access pipeline of spec 4.5 without any storage or rendering: what can be decided
 * from the image row, the settings and bytes already in memory. The main thread runs it with
 * cold paths that read channels and render (serve-image.ts); a delivery thread runs it with
 * cold paths that hand the request to the main thread (threads/front.ts). It imports nothing
 * that pulls in sharp, channels or the router, so a delivery thread stays small.
 */

export interface DeliveryRequest {
  area: DeliveryArea;
  request: Request;
  /** Resolves the image; throwing means the metadata lookup failed (500). */
  lookup: () => ImageView | undefined;
  /** Public endpoints count access and apply hotlink protection; the thumb endpoint does neither. */
  isPublic: boolean;
  /** The access was already counted by the delivery thread that handed this request over. */
  counted?: boolean;
  /**
   * The raw query string (without `?`), when the caller already split the URL: saves parsing
   * the whole URL again per request. Absent: taken from `request.url`.
   */
  query?: string;
  /**
   * The response goes to `Bun.serve` unchanged (the `/i/` fast path): it carries nosniff itself
   * and a HEAD answer its real Content-Length, so nobody has to edit its headers afterwards.
   */
  direct?: boolean;
  /**
   * Set by the pipeline when its answer is a hot 200 (prepared headers over bytes in memory):
   * what the warm-answer memo (hot-answers.ts) keeps. Never set for a fallback original.
   */
  prepared?: PreparedAnswer;
}

/** Bytes of a variant: a cached file to stream, or the bytes (in memory when hot or not kept on disk). */
export interface VariantBytes {
  path?: string;
  bytes?: Blob;
  size: number;
  /** The HotBytes key of `bytes`, when they came from there. */
  hotKey?: string;
}

/** Largest single original or variant kept in memory. */
export const HOT_ITEM_MAX = 2 * 1024 * 1024;

/** What the pipeline reads; the AppContext satisfies it, and so does a delivery thread's small context. */
export interface DeliveryDeps {
  settings: { get(): Readonly<Settings> };
  access: { record(imageId: string): void };
  referers: { current(): readonly string[] };
  variants: {
    hot: { get(key: string): Blob | undefined };
    hotVariant(sha256: string, width: number, format: DeliveryFormat, profile: string): VariantBytes | undefined;
  };
  log: Pick<Logger, "error" | "warn">;
}

export type Answer = Response | Promise<Response>;
export type ByteRange = { start: number; end: number };

/** A variant the pipeline chose, as the cold path needs it. */
export interface VariantChoice {
  /** 0 = not resized. */
  width: number;
  format: DeliveryFormat;
  /** The render profile (render-profile.ts) in its ETag and cache key. */
  profile: string;
  etag: string;
  /**
   * A negotiated WebP of the full size: served only when smaller than the original, which is
   * served instead otherwise (below, `notSmaller`).
   */
  onlyIfSmaller: boolean;
}

/**
 * Whether a variant is served as the original instead: a WebP the client did not ask for by name,
 * of the same pixels, that came out no smaller than the stored file (an already well-compressed
 * JPEG, palette art). Cloudflare Polish does the same (`webp_bigger`). The variant stays cached, so
 * the comparison costs a lookup, and an explicit `?format=webp` still gets it (image-fidelity audit MED-3).
 */
export function notSmaller(choice: Pick<VariantChoice, "onlyIfSmaller">, variantSize: number, image: ImageView): boolean {
  return choice.onlyIfSmaller && variantSize >= image.size;
}

/** Everything that needs more than memory: the caller decides how (read and render, or hand over). */
export interface ColdPaths {
  /** The metadata lookup threw. */
  lookupFailed(req: DeliveryRequest, err: unknown): Answer;
  /** Redirect mode for an original: a 302 answer, or undefined to serve the bytes. */
  redirect(req: DeliveryRequest, image: ImageView): Answer | undefined;
  /** An original (or a range of it) that is not in memory. */
  original(req: DeliveryRequest, image: ImageView, headers: Record<string, string>, range: ByteRange | undefined): Answer;
  /** A variant that is not in memory. */
  variant(req: DeliveryRequest, image: ImageView, headers: Record<string, string>, choice: VariantChoice): Answer;
}

/**
 * A bodiless HEAD response's length. The router rewrites Content-Length of a null body to 0,
 * so the server wrapper moves this value into Content-Length after routing.
 */
export const HEAD_LENGTH_HEADER = "x-kura-head-length";
export const NOSNIFF = "nosniff";

export const plain = (req: DeliveryRequest, status: number, text: string, headers: Record<string, string> = {}) => {
  headers["content-type"] = "text/plain; charset=utf-8";
  return answer(req, status, text, headers);
};

/** A delivery answer with `headers`; `length` of the body goes to Content-Length (or its HEAD stand-in). */
export function answer(req: DeliveryRequest, status: number, body: BodyInit | null, headers: Record<string, string>, length?: number): Response {
  if (req.direct) {
    headers["x-content-type-options"] = NOSNIFF;
    // Bun dates only answers with a body (RFC 9110 6.6.1 wants Date on every one); routed
    // answers get it in the server wrapper, direct ones (the `/i/` fast path, delivery threads) here.
    if ((body === null || req.request.method === "HEAD") && headers.date === undefined) headers.date = new Date().toUTCString();
  }
  if (length !== undefined) headers[body === null && !req.direct ? HEAD_LENGTH_HEADER : "Content-Length"] = String(length);
  return new Response(body, { status, headers });
}

/**
 * Synchronous when everything it needs is in memory (the row and the bytes): a hot image
 * then costs no promise at all. Throws InvalidParamsError (400) for bad `w`/`format`.
 */
export function deliver(app: DeliveryDeps, req: DeliveryRequest, cold: ColdPaths): Answer {
  const { request, area } = req;
  const settings = app.settings.get();
  const params = parseDeliveryQuery(req.query ?? new URL(request.url).search.slice(1), settings); // 400 JSON on invalid

  let image: ImageView | undefined;
  try {
    image = req.lookup();
  } catch (err) {
    return cold.lookupFailed(req, err);
  }
  if (!image || (image.expire_at !== null && image.expire_at <= sqlTime())) return plain(req, 404, "图片不存在或已过期");
  const isGet = request.method === "GET";
  // Spec 4.5: every public GET counts except a 400, so a hotlink 403 counts too.
  if (req.isPublic && isGet && !req.counted) app.access.record(image.id);
  if (req.isPublic && !refererAllowed(request.headers.get("referer"), app.referers.current(), settings.allow_empty_referer)) {
    return plain(req, 403, "禁止盗链");
  }

  const rep = chooseRepresentation(image, params, request.headers.get("accept"), settings.process_formats);
  if (rep.kind === "original")
    return serveOriginal(app, req, image, rep.varyAccept, cold, params.width === null && params.format === null ? "plain" : "processed");

  const profile = renderProfile(settings);
  const etag = variantEtag(image.sha256, rep.width, rep.format, profile);
  const headers = () => cacheHeaders({ area, kind: "variant", etag, varyAccept: rep.varyAccept });
  if (ifNoneMatchMatches(request.headers.get("if-none-match"), etag)) return answer(req, 304, null, headers());
  const format = rep.format as DeliveryFormat;
  const choice: VariantChoice = { width: rep.width, format, profile, etag, onlyIfSmaller: rep.varyAccept && rep.width === 0 };
  const hot = app.variants.hotVariant(image.sha256, rep.width, format, profile);
  if (hot && notSmaller(choice, hot.size, image)) return serveOriginal(app, req, image, true, cold, "processed");
  if (hot && isGet) {
    const key = `v ${rep.width} ${format} ${rep.varyAccept} ${hot.size}`;
    return preparedAnswer(req, image, key, hot.bytes!, () => variantHeaders(headers(), format, hot.size), hot.hotKey);
  }
  if (hot) return variantAnswer(req, headers(), format, hot);
  return cold.variant(req, image, headers(), choice);
}

function variantHeaders(headers: Record<string, string>, format: DeliveryFormat, size: number) {
  headers["Content-Type"] = formatToMime(format);
  headers["Content-Length"] = String(size);
  return headers;
}

/**
 * Response headers of the hot 200 answers, built once per cached image row (its lookup lives
 * LOOKUP_TTL_MS) and representation: copying a prepared Headers costs ~0.2 µs, building one
 * from an object ~0.7 µs, a visible share of a ~14 µs delivery (bench/README.md).
 */
const preparedHeaders = new WeakMap<ImageView, Map<string, Headers>>();

/** `hotKey`: the HotBytes key of `body`, when the answer may be remembered whole (not a fallback). */
function preparedAnswer(req: DeliveryRequest, image: ImageView, key: string, body: Blob, build: () => Record<string, string>, hotKey?: string): Response {
  const forImage = getOrCreate(preparedHeaders, image, () => new Map<string, Headers>());
  const fullKey = `${req.area} ${req.direct === true} ${key}`;
  const headers = getOrCreate(forImage, fullKey, () => {
    const record = build();
    if (req.direct) record["x-content-type-options"] = NOSNIFF;
    return new Headers(record);
  });
  if (hotKey !== undefined) req.prepared = { image, hotKey, variant: hotKey !== image.sha256, body, headers };
  return new Response(body, { status: 200, headers });
}

export function variantAnswer(req: DeliveryRequest, headers: Record<string, string>, format: DeliveryFormat, variant: VariantBytes): Response {
  const isGet = req.request.method === "GET";
  headers["Content-Type"] = formatToMime(format);
  return answer(req, 200, isGet ? (variant.path ? Bun.file(variant.path) : variant.bytes!) : null, headers, variant.size);
}

/** `Last-Modified` of an image, formatted once per cached row (the row object lives as long as its lookup). */
const lastModifiedTexts = new WeakMap<ImageView, string>();
function lastModifiedOf(image: ImageView): string {
  return getOrCreate(lastModifiedTexts, image, () => httpDate(parseSqlTime(image.created_at)));
}

/**
 * The Last-Modified an original is sent and validated with. On `/o/` an alias can move to another
 * image made in the same second, which has the same date: one given out in that second could later
 * validate the other image (a 304 for bytes the client never had). RFC 9110 8.8.2.2 makes such a
 * date weak, so within its own second it is neither sent nor honoured there (the ETag still is).
 * `/i/` links never change what they name.
 */
function datedLastModified(area: DeliveryRequest["area"], image: ImageView): string | undefined {
  const text = lastModifiedOf(image);
  if (area !== "o") return text;
  return Date.parse(text) < Math.floor(Date.now() / 1000) * 1000 ? text : undefined;
}

/**
 * How an original came to be the answer: asked for as such (`plain`), the result of a `w` or
 * `format` that needs no pixels or of a WebP that was no smaller (`processed`: spec 4.5 rule 3
 * never redirects those), or in place of a variant that failed to render (`fallback`).
 */
export type OriginalAs = "plain" | "processed" | "fallback";

/** Originals: 304, 302 in redirect mode, HEAD from metadata only, else bytes (cold: with failover). */
export function serveOriginal(app: DeliveryDeps, req: DeliveryRequest, image: ImageView, varyAccept: boolean, cold: ColdPaths, as: OriginalAs): Answer {
  const { request, area } = req;
  const fallback = as === "fallback";
  const etag = originalEtag(image.sha256);
  const lastModified = fallback ? undefined : datedLastModified(area, image);
  const cache = () => (fallback ? cacheHeaders({ area, kind: "fallback" }) : cacheHeaders({ area, kind: "original", etag, varyAccept, lastModified }));
  if (!fallback) {
    const ifNoneMatch = request.headers.get("if-none-match");
    if (ifNoneMatchMatches(ifNoneMatch, etag) || notModifiedSince(ifNoneMatch, request.headers.get("if-modified-since"), lastModified)) {
      return answer(req, 304, null, cache());
    }
  }

  if (as === "plain" && app.settings.get().access_mode === "redirect") {
    const redirected = cold.redirect(req, image);
    if (redirected) return redirected;
  }
  const headers = () => {
    const h = cache();
    h["Content-Type"] = image.mime;
    h["Accept-Ranges"] = "bytes";
    return h;
  };
  // Size and type come from metadata: HEAD never opens the channel object.
  if (request.method === "HEAD") return answer(req, 200, null, headers(), image.size);
  const range = ifRangeAllows(request.headers.get("if-range"), etag, lastModified) ? parseRange(request.headers.get("range"), image.size) : undefined;
  if (range === "unsatisfiable") return plain(req, 416, "请求的范围无效", { "Content-Range": `bytes */${image.size}` });
  const hot = app.variants.hot.get(image.sha256);
  if (!hot) return cold.original(req, image, headers(), range);
  if (!range) {
    return preparedAnswer(
      req,
      image,
      `o ${fallback} ${varyAccept} ${hot.size} ${lastModified !== undefined}`,
      hot,
      () => {
        const h = headers();
        h["Content-Length"] = String(hot.size);
        return h;
      },
      fallback ? undefined : image.sha256,
    );
  }
  const partial = headers();
  partial["Content-Range"] = `bytes ${range.start}-${range.end}/${image.size}`;
  return answer(req, 206, hot.slice(range.start, range.end + 1), partial, range.end + 1 - range.start);
}

/**
 * One `bytes=a-b` / `bytes=a-` / `bytes=-n` range (RFC 9110 §14.1.2), or undefined to serve the
 * whole body: no Range, a unit other than bytes (§14.2: MUST be ignored), a syntactically invalid
 * range (`bytes=9-1`, `bytes=abc`: the RFC allows ignoring, and a client that sent garbage still
 * gets the image), or several ranges (multipart answers are not supported). "unsatisfiable": a
 * well-formed range with no byte in the representation (`bytes=<size>-`, `bytes=-0`, any range
 * of an empty body), which answers 416 with a Content-Range that names the size.
 */
export function parseRange(header: string | null, size: number): ByteRange | undefined | "unsatisfiable" {
  if (!header) return undefined;
  // Range units are case-insensitive (§14.1); OWS around the header value is not part of it.
  const m = /^bytes=(\d*)-(\d*)$/i.exec(header.trim());
  if (!m) return undefined;
  const [, first, last] = m as unknown as [string, string, string];
  if (first === "") {
    if (last === "") return undefined;
    const suffix = Number(last);
    if (suffix === 0 || size === 0) return "unsatisfiable";
    return { start: Math.max(0, size - suffix), end: size - 1 };
  }
  if (last !== "" && digitsLess(last, first)) return undefined;
  const start = Number(first);
  if (start >= size) return "unsatisfiable";
  return { start, end: last === "" ? size - 1 : Math.min(Number(last), size - 1) };
}

/** a < b for decimal digit strings of any length: as Numbers, two 30-digit positions can compare equal. */
function digitsLess(a: string, b: string): boolean {
  const x = a.replace(/^0+/, "");
  const y = b.replace(/^0+/, "");
  return x.length !== y.length ? x.length < y.length : x < y;
}
