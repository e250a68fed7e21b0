import { jsonError } from "./errors";

/** JSON bodies are small control messages; uploads stream through multipart or raw bodies instead. */
export const MAX_JSON_BYTES = 1024 * 1024;

const tooLarge = () => jsonError(413, "请求体过大（JSON 请求体最多 1 MiB）");

/**
 * The router buffers JSON bodies whole, so a JSON request is bounded before it gets
 * there: a declared length above the cap is refused unread, and a chunked body is read
 * up to the cap. Returns the request to route (re-built around the bounded bytes) or a 413.
 */
export async function boundJsonBody(request: Request): Promise<Request | Response> {
  if (!request.body || !(request.headers.get("content-type") ?? "").toLowerCase().includes("json")) return request;
  const declared = request.headers.get("content-length");
  if (declared !== null) return Number(declared) > MAX_JSON_BYTES ? tooLarge() : request;
  const chunks: Uint8Array[] = [];
  let size = 0;
  for await (const chunk of request.body) {
    size += chunk.length;
    if (size > MAX_JSON_BYTES) return tooLarge();
    chunks.push(chunk);
  }
  return new Request(request, { body: Buffer.concat(chunks) });
}
