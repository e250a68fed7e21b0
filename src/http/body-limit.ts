import { jsonError } from "./errors";

/** Control-plane bodies (JSON, forms) are small; image uploads stream through their own routes instead. */
export const MAX_BODY_BYTES = 1024 * 1024;

/** Routes that stream their bodies to disk under max_upload_mb themselves. */
const STREAMING_PATHS = new Set(["/api/admin/upload", "/api/upload", "/api/v1/upload", "/api/1/upload"]);

/** The /s3/ surface bounds every body itself (objects and parts by max_upload_mb, XML bodies by 1 MiB). */
const isS3Path = (path: string) => path === "/s3" || path.startsWith("/s3/");

// The unread rest of the body is never wanted: the connection closes with the answer instead of waiting
// (with the client stuck sending) until the idle timeout, or holding up a graceful stop.
const tooLarge = () => jsonError(413, "请求体过大（最多 1 MiB）", { connection: "close" });

/**
 * The router buffers bodies whole, so every request except the streaming uploads is
 * bounded before it gets there: a declared length above the cap is refused unread, and
 * a chunked body is read up to the cap. Returns the request to route (re-built around
 * the bounded bytes) or a 413.
 */
export async function boundSmallBody(request: Request, path: string): Promise<Request | Response> {
  if (!request.body || STREAMING_PATHS.has(path) || isS3Path(path)) return request;
  const declared = request.headers.get("content-length");
  if (declared !== null) return Number(declared) > MAX_BODY_BYTES ? tooLarge() : request;
  const chunks: Uint8Array[] = [];
  let size = 0;
  for await (const chunk of request.body) {
    size += chunk.length;
    if (size > MAX_BODY_BYTES) return tooLarge();
    chunks.push(chunk);
  }
  return new Request(request, { body: Buffer.concat(chunks) });
}
