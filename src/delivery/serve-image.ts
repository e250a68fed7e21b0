import type { AppContext } from "../context";
import type { ImageView } from "../images/repo";
import { NoReadableChannelError, openBlob, readBlob, readCandidates } from "../images/read";
import { cacheHeaders } from "./cache-headers";
import { logServerFault } from "../ops/server-faults";
import { VariantUnavailableError } from "./variants";
import { QueueWaitTimeoutError } from "./limiter";
import { getOrCreate } from "../shared/get-or-create";
import { HeldBackLog } from "../ops/held-back-log";
import {
  answer,
  type ColdPaths,
  deliver,
  type DeliveryRequest,
  HOT_ITEM_MAX,
  notSmaller,
  plain,
  serveOriginal,
  type VariantChoice,
  variantAnswer,
} from "./pipeline";

export { HEAD_LENGTH_HEADER, parseRange, type DeliveryRequest } from "./pipeline";

/**
 * Image access pipeline of spec 4.5, shared by /i/, /o/ and the admin thumb endpoint, on the
 * main thread: the in-memory pipeline (pipeline.ts) with cold paths that read the channels
 * (with failover) and render variants. Synchronous when the row and the bytes are in memory.
 */
export function serveImage(app: AppContext, req: DeliveryRequest): Response | Promise<Response> {
  return deliver(app, req, coldPathsOf(app));
}

const coldPaths = new WeakMap<AppContext, ColdPaths>();

function coldPathsOf(app: AppContext): ColdPaths {
  let paths = coldPaths.get(app);
  if (paths) return paths;
  paths = {
    lookupFailed(req, err) {
      app.log.error("图片元数据查询失败", { err: (err as Error).message });
      return plain(req, 500, "图片元数据查询失败，请稍后重试");
    },
    redirect(req, image) {
      const target = directLink(app, image);
      return target ? answer(req, 302, null, { ...cacheHeaders({ area: req.area, kind: "redirect" }), Location: target }) : undefined;
    },
    original: (req, image, headers, range) => storedOriginal(app, req, image, headers, range),
    variant: (req, image, headers, choice) => renderedVariant(app, req, image, headers, choice, paths!),
  };
  coldPaths.set(app, paths);
  return paths;
}

async function renderedVariant(
  app: AppContext,
  req: DeliveryRequest,
  image: ImageView,
  headers: Record<string, string>,
  choice: VariantChoice,
  cold: ColdPaths,
) {
  try {
    const variant = await app.variants.get(blobOf(image), choice.width, choice.format, choice.profile);
    if (notSmaller(choice, variant.size, image)) return serveOriginal(app, req, image, true, cold, "processed");
    return variantAnswer(req, headers, choice.format, variant);
  } catch (err) {
    // No channel has the source: the original cannot be read either. (Any other failure, even the
    // server's own, falls back to the original, which answers for itself.)
    if (err instanceof NoReadableChannelError) return plain(req, 503, err.message);
    // A failure remembered from an earlier request was logged then: repeating the request
    // (anyone may, anonymously) must not write a log line each time.
    if (err instanceof QueueWaitTimeoutError) logBusyRender(app, image.id, err);
    else if (!(err instanceof VariantUnavailableError)) app.log.warn("图片处理失败，返回原图", { image: image.id, err: (err as Error).message });
    return serveOriginal(app, req, image, false, cold, "fallback");
  }
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
      return answer(req, 206, part.file ?? part.stream, headers, part.size);
    }
    // Small originals are read whole (failing over if a body breaks off or its bytes do not match
    // the SHA-256) and kept hot: the next request costs no storage read, and the cache only ever
    // holds bytes proven once, on the way in. Larger ones stream, so the answer starts before the
    // end; their stream is checked as it passes, and wrong bytes abort the answer before its last
    // chunk (README, "Public delivery"). The delivery threads keep only complete small answers.
    return await readBlob(app, blobOf(image), async (result) => {
      if (result.size !== image.size) {
        await result.stream.cancel().catch(() => {});
        throw new Error(`存储渠道报告的大小 ${result.size} 与图片大小 ${image.size} 不符`);
      }
      if (result.size > HOT_ITEM_MAX) return answer(req, 200, result.file ?? result.stream, headers, result.size);
      const read = new Uint8Array(await new Response(result.stream).arrayBuffer());
      if (read.byteLength !== image.size) throw new Error(`存储渠道返回了 ${read.byteLength} 字节，图片大小为 ${image.size} 字节`);
      return answer(req, 200, app.variants.hot.set(image.sha256, read), headers, read.byteLength);
    });
  } catch (err) {
    const unavailable = unreadable(app, req, err);
    if (unavailable) return unavailable;
    throw err;
  }
}

/**
 * No channel could be read: the channels' 503, or when the server itself was out of file
 * descriptors, that retryable 503 with an ERROR naming the limit (as on every other surface).
 * Undefined for any other error.
 */
function unreadable(app: AppContext, req: DeliveryRequest, err: unknown): Response | undefined {
  if (err instanceof NoReadableChannelError) return plain(req, 503, err.message);
  const fault = logServerFault(app.log, req.request, err);
  return fault && plain(req, 503, fault.message, fault.headers);
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

/**
 * Renders that waited past process_timeout_ms for a slot: one WARN a minute however many there are
 * (with how many the minute before held back). Anyone can ask for cold variants, and a burst of 20
 * wrote 20 lines in under a second; they are not remembered as failures (the next may get a slot).
 */
const busyLogs = new WeakMap<AppContext, HeldBackLog>();
function logBusyRender(app: AppContext, imageId: string, err: QueueWaitTimeoutError) {
  const line = getOrCreate(busyLogs, app, () => new HeldBackLog(Date.now)).admit("render-queue", "timeout");
  if (line.log) app.log.warn("图片处理繁忙，排队超时，返回原图", { image: imageId, err: err.message, held_back: line.heldBack });
}
