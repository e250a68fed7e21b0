import type { AppContext } from "../context";
import { parseSqlTime, sqlTime } from "../db/time";
import type { ImageView } from "../images/repo";
import { NoReadableChannelError, openBlob, readCandidates } from "../images/read";
import { cacheHeaders, httpDate, type DeliveryArea } from "./cache-headers";
import { ifNoneMatchMatches, originalEtag, variantEtag } from "./etag";
import { chooseRepresentation, formatToMime, type DeliveryFormat } from "./negotiate";
import { parseDeliveryQuery } from "./params";
import { HOT_ITEM_MAX, type VariantBytes } from "./variants";
import { refererAllowed } from "./referer";
import { getOrCreate } from "../shared/get-or-create";

export interface DeliveryRequest {
  area: DeliveryArea;
  request: Request;
  /** Resolves the image; throwing means the metadata lookup failed (500). */
  lookup: () => ImageView | undefined;
  /** Public endpoints count access and apply hotlink protection; the thumb endpoint does neither. */
  isPublic: boolean;
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
}

/**
 * A bodiless HEAD response's length. The router rewrites Content-Length of a null body to 0,
 * so the server wrapper moves this value into Content-Length after routing.
 */
export const HEAD_LENGTH_HEADER = "x-kura-head-length";
export const NOSNIFF = "nosniff";

const plain = (req: DeliveryRequest, status: number, text: string, headers: Record<string, string> = {}) => {
  headers["content-type"] = "text/plain; charset=utf-8";
  return answer(req, status, text, headers);
};

/** A delivery answer with `headers`; `length` of the body goes to Content-Length (or its HEAD stand-in). */
function answer(req: DeliveryRequest, status: number, body: BodyInit | null, headers: Record<string, string>, length?: number): Response {
  if (req.direct) headers["x-content-type-options"] = NOSNIFF;
  if (length !== undefined) headers[body === null && !req.direct ? HEAD_LENGTH_HEADER : "Content-Length"] = String(length);
  return new Response(body, { status, headers });
}

/**
 * Image access pipeline of spec 4.5, shared by /i/, /o/ and the admin thumb endpoint.
 * Synchronous when everything it needs is in memory (the row and the bytes): a hot image
 * then costs no promise at all. Throws InvalidParamsError (400) for bad `w`/`format`.
 */
export function serveImage(app: AppContext, req: DeliveryRequest): Response | Promise<Response> {
  const { request, area } = req;
  const settings = app.settings.get();
  const params = parseDeliveryQuery(req.query ?? new URL(request.url).search.slice(1), settings); // 400 JSON on invalid

  let image: ImageView | undefined;
  try {
    image = req.lookup();
  } catch (err) {
    app.log.error("图片元数据查询失败", { err: (err as Error).message });
    return plain(req, 500, "图片元数据查询失败，请稍后重试");
  }
  if (!image || (image.expire_at !== null && image.expire_at <= sqlTime())) return plain(req, 404, "图片不存在或已过期");
  const isGet = request.method === "GET";
  // Spec 4.5: every public GET counts except a 400, so a hotlink 403 counts too.
  if (req.isPublic && isGet) app.access.record(image.id);
  if (req.isPublic && !refererAllowed(request.headers.get("referer"), app.referers.current(), settings.allow_empty_referer)) {
    return plain(req, 403, "禁止盗链");
  }

  const rep = chooseRepresentation(image.mime, params, request.headers.get("accept"), settings.process_formats);
  if (rep.kind === "original") return serveOriginal(app, req, image, rep.varyAccept);

  const etag = variantEtag(image.sha256, rep.width, rep.format);
  const headers = () => cacheHeaders({ area, kind: "variant", etag, varyAccept: rep.varyAccept });
  if (ifNoneMatchMatches(request.headers.get("if-none-match"), etag)) return answer(req, 304, null, headers());
  const format = rep.format as DeliveryFormat;
  const hot = app.variants.hotVariant(image.sha256, rep.width, format);
  if (hot && isGet) {
    const key = `v ${rep.width} ${format} ${rep.varyAccept} ${hot.size}`;
    return preparedAnswer(req, image, key, hot.bytes!, () => variantHeaders(headers(), format, hot.size));
  }
  if (hot) return variantAnswer(req, headers(), format, hot);
  return renderedVariant(app, req, image, headers(), rep.width, format);
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

function preparedAnswer(req: DeliveryRequest, image: ImageView, key: string, body: Blob, build: () => Record<string, string>): Response {
  const forImage = getOrCreate(preparedHeaders, image, () => new Map<string, Headers>());
  const fullKey = `${req.area} ${req.direct === true} ${key}`;
  const headers = getOrCreate(forImage, fullKey, () => {
    const record = build();
    if (req.direct) record["x-content-type-options"] = NOSNIFF;
    return new Headers(record);
  });
  return new Response(body, { status: 200, headers });
}

async function renderedVariant(
  app: AppContext,
  req: DeliveryRequest,
  image: ImageView,
  headers: Record<string, string>,
  width: number,
  format: DeliveryFormat,
) {
  try {
    return variantAnswer(req, headers, format, await app.variants.get(blobOf(image), width, format));
  } catch (err) {
    if (err instanceof NoReadableChannelError) return plain(req, 503, err.message);
    app.log.warn("图片处理失败，返回原图", { image: image.id, err: (err as Error).message });
    return serveOriginal(app, req, image, false, true);
  }
}

function variantAnswer(req: DeliveryRequest, headers: Record<string, string>, format: DeliveryFormat, variant: VariantBytes): Response {
  const isGet = req.request.method === "GET";
  headers["Content-Type"] = formatToMime(format);
  return answer(req, 200, isGet ? (variant.path ? Bun.file(variant.path) : variant.bytes!) : null, headers, variant.size);
}

/** `Last-Modified` of an image, formatted once per cached row (the row object lives as long as its lookup). */
const lastModifiedTexts = new WeakMap<ImageView, string>();
function lastModifiedOf(image: ImageView): string {
  return getOrCreate(lastModifiedTexts, image, () => httpDate(parseSqlTime(image.created_at)));
}

/** Originals: 304, 302 in redirect mode, HEAD from metadata only, else bytes with failover. */
function serveOriginal(app: AppContext, req: DeliveryRequest, image: ImageView, varyAccept: boolean, fallback = false): Response | Promise<Response> {
  const { request, area } = req;
  const etag = originalEtag(image.sha256);
  const cache = () =>
    fallback ? cacheHeaders({ area, kind: "fallback" }) : cacheHeaders({ area, kind: "original", etag, varyAccept, lastModified: lastModifiedOf(image) });
  if (!fallback && ifNoneMatchMatches(request.headers.get("if-none-match"), etag)) return answer(req, 304, null, cache());

  if (!fallback && app.settings.get().access_mode === "redirect") {
    const target = directLink(app, image);
    if (target) return answer(req, 302, null, { ...cacheHeaders({ area, kind: "redirect" }), Location: target });
  }
  const headers = () => {
    const h = cache();
    h["Content-Type"] = image.mime;
    h["Accept-Ranges"] = "bytes";
    return h;
  };
  // Size and type come from metadata: HEAD never opens the channel object.
  if (request.method === "HEAD") return answer(req, 200, null, headers(), image.size);
  const range = parseRange(request.headers.get("range"), image.size);
  if (range === "invalid") return plain(req, 416, "请求的范围无效", { "Content-Range": `bytes */${image.size}` });
  const hot = app.variants.hot.get(image.sha256);
  if (!hot) return storedOriginal(app, req, image, headers(), range);
  if (!range) {
    return preparedAnswer(req, image, `o ${fallback} ${varyAccept} ${hot.size}`, hot, () => {
      const h = headers();
      h["Content-Length"] = String(hot.size);
      return h;
    });
  }
  const partial = headers();
  partial["Content-Range"] = `bytes ${range.start}-${range.end}/${image.size}`;
  return answer(req, 206, hot.slice(range.start, range.end + 1), partial, range.end + 1 - range.start);
}

/** An original not in memory: read from its channels (with failover); small ones are kept hot. */
async function storedOriginal(
  app: AppContext,
  req: DeliveryRequest,
  image: ImageView,
  headers: Record<string, string>,
  range: { start: number; end: number } | undefined,
): Promise<Response> {
  try {
    if (range) {
      const part = await openBlob(app, blobOf(image), range);
      headers["Content-Range"] = `bytes ${range.start}-${range.start + part.size - 1}/${image.size}`;
      return answer(req, 206, part.stream, headers, part.size);
    }
    const result = await openBlob(app, blobOf(image));
    if (result.size > HOT_ITEM_MAX) return answer(req, 200, result.stream, headers, result.size);
    // Small originals are read whole and kept hot: the next request costs no storage read.
    const bytes = app.variants.hot.set(image.sha256, new Uint8Array(await new Response(result.stream).arrayBuffer()));
    return answer(req, 200, bytes, headers, result.size);
  } catch (err) {
    if (err instanceof NoReadableChannelError) return plain(req, 503, err.message);
    throw err;
  }
}
/** The blob fields delivery needs, straight from the image view (no second query). */
function blobOf(image: ImageView) {
  return { id: image.blob_id, sha256: image.sha256, storage_key: image.storage_key };
}

/** 302 target: a channel holding a done replica that allows direct links, is unencrypted and has a public address. */
function directLink(app: AppContext, image: ImageView): string | undefined {
  for (const channel of readCandidates(app, image.blob_id)) {
    if (!channel.healthy || !channel.row.allow_direct_link || channel.row.encrypted) continue;
    const base = app.channels.repo.secrets(channel.row).config.public_base_url?.replace(/\/+$/, "");
    if (base) return `${base}/${image.storage_key.split("/").map(encodeURIComponent).join("/")}`;
  }
  return undefined;
}

/** One `bytes=a-b` / `bytes=a-` / `bytes=-n` range; multi-range requests are served whole. */
export function parseRange(header: string | null, size: number): { start: number; end: number } | undefined | "invalid" {
  if (!header) return undefined;
  const m = /^bytes=(\d*)-(\d*)$/.exec(header.trim());
  if (!m || (m[1] === "" && m[2] === "")) return header.includes(",") ? undefined : "invalid";
  let start: number;
  let end: number;
  if (m[1] === "") {
    const suffix = Number(m[2]);
    if (suffix === 0) return "invalid";
    start = Math.max(0, size - suffix);
    end = size - 1;
  } else {
    start = Number(m[1]);
    end = m[2] === "" ? size - 1 : Math.min(Number(m[2]), size - 1);
  }
  if (start >= size || end < start) return "invalid";
  return { start, end };
}
