import type { AppContext } from "../context";
import { parseSqlTime, sqlTime } from "../db/time";
import type { ImageView } from "../images/repo";
import { NoReadableChannelError, openBlob, readCandidates } from "../images/read";
import { cacheHeaders, type DeliveryArea } from "./cache-headers";
import { ifNoneMatchMatches, originalEtag, variantEtag } from "./etag";
import { chooseRepresentation, formatToMime, type DeliveryFormat } from "./negotiate";
import { parseDeliveryParams } from "./params";
import { HOT_ITEM_MAX } from "./variants";
import { refererAllowed } from "./referer";

export interface DeliveryRequest {
  area: DeliveryArea;
  request: Request;
  /** Resolves the image; throwing means the metadata lookup failed (500). */
  lookup: () => ImageView | undefined;
  /** Public endpoints count access and apply hotlink protection; the thumb endpoint does neither. */
  isPublic: boolean;
}

/**
 * A bodiless HEAD response's length. The router rewrites Content-Length of a null body to 0,
 * so the server wrapper moves this value into Content-Length after routing.
 */
export const HEAD_LENGTH_HEADER = "x-kura-head-length";

const plain = (status: number, text: string, headers: Record<string, string> = {}) =>
  new Response(text, { status, headers: { "content-type": "text/plain; charset=utf-8", ...headers } });

/** Image access pipeline of spec 4.5, shared by /i/, /o/ and the admin thumb endpoint. */
export async function serveImage(app: AppContext, req: DeliveryRequest): Promise<Response> {
  const { request, area } = req;
  const settings = app.settings.get();
  const params = parseDeliveryParams(new URL(request.url).searchParams, settings); // 400 JSON on invalid

  let image: ImageView | undefined;
  try {
    image = req.lookup();
  } catch (err) {
    app.log.error("图片元数据查询失败", { err: (err as Error).message });
    return plain(500, "图片元数据查询失败，请稍后重试");
  }
  if (!image || (image.expire_at !== null && image.expire_at <= sqlTime())) return plain(404, "图片不存在或已过期");
  const isGet = request.method === "GET";
  // Spec 4.5: every public GET counts except a 400, so a hotlink 403 counts too.
  if (req.isPublic && isGet) app.access.record(image.id);
  if (req.isPublic && !refererAllowed(request.headers.get("referer"), app.referers.current(), settings.allow_empty_referer)) {
    return plain(403, "禁止盗链");
  }

  const rep = chooseRepresentation(image.mime, params, request.headers.get("accept"), settings.process_formats);
  if (rep.kind === "original") return serveOriginal(app, req, image, rep.varyAccept);

  const etag = variantEtag(image.sha256, rep.width, rep.format);
  const headers = cacheHeaders({ area, kind: "variant", etag, varyAccept: rep.varyAccept });
  if (ifNoneMatchMatches(request.headers.get("if-none-match"), etag)) return new Response(null, { status: 304, headers });
  try {
    const variant = await app.variants.get(blobOf(image), rep.width, rep.format as DeliveryFormat);
    const body = variant.path ? Bun.file(variant.path) : variant.bytes!;
    headers["Content-Type"] = formatToMime(rep.format as DeliveryFormat);
    headers[isGet ? "Content-Length" : HEAD_LENGTH_HEADER] = String(variant.size);
    return new Response(isGet ? body : null, { status: 200, headers });
  } catch (err) {
    if (err instanceof NoReadableChannelError) return plain(503, err.message);
    app.log.warn("图片处理失败，返回原图", { image: image.id, err: (err as Error).message });
    return serveOriginal(app, req, image, false, true);
  }
}

/** Originals: 304, 302 in redirect mode, HEAD from metadata only, else bytes with failover. */
async function serveOriginal(app: AppContext, req: DeliveryRequest, image: ImageView, varyAccept: boolean, fallback = false): Promise<Response> {
  const { request, area } = req;
  const etag = originalEtag(image.sha256);
  const headers = fallback
    ? cacheHeaders({ area, kind: "fallback" })
    : cacheHeaders({ area, kind: "original", etag, varyAccept, lastModified: parseSqlTime(image.created_at) });
  if (!fallback && ifNoneMatchMatches(request.headers.get("if-none-match"), etag)) return new Response(null, { status: 304, headers });

  if (!fallback && app.settings.get().access_mode === "redirect") {
    const target = directLink(app, image);
    if (target) return new Response(null, { status: 302, headers: { ...cacheHeaders({ area, kind: "redirect" }), Location: target } });
  }
  headers["Content-Type"] = image.mime;
  headers["Accept-Ranges"] = "bytes";
  if (request.method === "HEAD") {
    // Size and type come from metadata: HEAD never opens the channel object.
    headers[HEAD_LENGTH_HEADER] = String(image.size);
    return new Response(null, { status: 200, headers });
  }
  const range = parseRange(request.headers.get("range"), image.size);
  if (range === "invalid") return plain(416, "请求的范围无效", { "Content-Range": `bytes */${image.size}` });
  const hot = app.variants.hot.get(image.sha256);
  try {
    if (range) {
      const part = hot
        ? { stream: hot.slice(range.start, range.end + 1), size: range.end + 1 - range.start }
        : await openBlob(app, blobOf(image), range);
      headers["Content-Length"] = String(part.size);
      headers["Content-Range"] = `bytes ${range.start}-${range.start + part.size - 1}/${image.size}`;
      return new Response(part.stream, { status: 206, headers });
    }
    if (hot) {
      headers["Content-Length"] = String(hot.size);
      return new Response(hot, { status: 200, headers });
    }
    const result = await openBlob(app, blobOf(image));
    headers["Content-Length"] = String(result.size);
    if (result.size > HOT_ITEM_MAX) return new Response(result.stream, { status: 200, headers });
    // Small originals are read whole and kept hot: the next request costs no storage read.
    const bytes = app.variants.hot.set(image.sha256, new Uint8Array(await new Response(result.stream).arrayBuffer()));
    return new Response(bytes, { status: 200, headers });
  } catch (err) {
    if (err instanceof NoReadableChannelError) return plain(503, err.message);
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
