import { jsonError } from "../errors";
import { hasOrigin, PLACEHOLDER_ORIGIN, withPlaceholderOrigin, withUrl } from "../raw-url";
import { pathStart } from "../../shared/url-target";
import { HANDOVER_COUNTED_HEADER, HANDOVER_PEER_HEADER, HANDOVER_SECRET_HEADER, HANDOVER_TARGET_HEADER } from "./protocol";

/**
 * Hop-by-hop request headers that describe the client's connection, not the request: the
 * thread's own connection to the main thread frames the body itself (a stream body goes
 * chunked unless Content-Length says otherwise), and 100-continue was already answered.
 */
const CONNECTION_HEADERS = ["connection", "keep-alive", "transfer-encoding", "expect", "te", "upgrade", "proxy-connection"];
/** Framing of the main thread's answer, which Bun.serve sets again for the client. */
const ANSWER_FRAMING = ["transfer-encoding", "keep-alive"];

export interface HandoverTarget {
  socket: string;
  secret: string;
}

/**
 * Hands a request to the main thread over its private socket, unchanged: method, raw path and
 * query, Host and every end-to-end header (SigV4 signs them), the body as a stream (the main
 * thread applies its caps while reading), the client's abort. The answer streams back as is,
 * with its status, headers (Connection: close of tool surfaces included) and HEAD length.
 */
export async function handOver(target: HandoverTarget, request: Request, peer: string, counted: boolean): Promise<Response> {
  const headers = new Headers(request.headers);
  for (const name of CONNECTION_HEADERS) headers.delete(name);
  headers.set(HANDOVER_SECRET_HEADER, target.secret);
  headers.set(HANDOVER_PEER_HEADER, peer);
  if (counted) headers.set(HANDOVER_COUNTED_HEADER, "1");
  else headers.delete(HANDOVER_COUNTED_HEADER);
  // fetch would send the URL's authority as Host: a request without one must stay without one.
  if (!headers.has("host")) headers.set("host", "");
  const { sent, carried } = handoverTarget(request.url);
  if (carried === undefined) headers.delete(HANDOVER_TARGET_HEADER);
  else headers.set(HANDOVER_TARGET_HEADER, carried);
  let upstream: Response;
  try {
    // The Host header, not this placeholder, is what the main thread sees (and what may be invalid).
    upstream = await fetch(PLACEHOLDER_ORIGIN + sent, {
      method: request.method,
      headers,
      body: request.body,
      redirect: "manual",
      decompress: false,
      timeout: false,
      signal: request.signal,
      unix: target.socket,
      duplex: "half",
    } as RequestInit);
  } catch {
    // The main thread is stopping or gone; the client may retry (a new connection may reach it).
    return jsonError(503, "服务暂时不可用，请稍后重试", { "retry-after": "1", connection: "close" });
  }
  const answerHeaders = new Headers(upstream.headers);
  for (const name of ANSWER_FRAMING) answerHeaders.delete(name);
  return new Response(upstream.body, { status: upstream.status, statusText: upstream.statusText, headers: answerHeaders });
}

/**
 * What the fetch to the main thread asks for, and the target carried in a header when fetch would
 * not deliver it unchanged. The main listener keeps `//i/x` as sent (the router answers 404), fetch
 * collapses the leading slashes (the main thread would serve the image: the answer would depend on
 * the listener), and drops a fragment; a target without a usable Host is not yet normalized. Such a
 * target travels percent-encoded (header values are bytes) and the fetch asks for `/`, so a long
 * target is not sent twice. Everything else goes as it is: most requests carry nothing extra.
 */
export function handoverTarget(url: string): { sent: string; carried?: string } {
  const start = pathStart(url);
  const target = start < 0 ? "/" : url.slice(start);
  if (hasOrigin(url) && !target.startsWith("//") && !target.includes("#")) return { sent: target };
  try {
    return { sent: "/", carried: encodeURIComponent(hasOrigin(url) ? target : url) };
  } catch {
    return { sent: target }; // not well-formed UTF-16 (Bun never builds such a URL): sent as fetch sends it
  }
}

/**
 * The main thread's side: the handed-over request at the target the thread carried, so it is
 * answered exactly as if the main listener had accepted the connection. Runs after the secret
 * was checked; a client's own header of that name never gets here (handOver replaces it).
 */
export function restoreTarget(request: Request): Request {
  const carried = request.headers.get(HANDOVER_TARGET_HEADER);
  if (carried === null) return request;
  request.headers.delete(HANDOVER_TARGET_HEADER);
  let target: string;
  try {
    target = decodeURIComponent(carried);
  } catch {
    return request;
  }
  const url = request.url;
  if (hasOrigin(url) && URL.canParse(url)) return withUrl(request, url.slice(0, pathStart(url)) + target);
  // No usable Host: the placeholder the main listener gives such a request (app.ts, routableRequest).
  return withPlaceholderOrigin(request, target);
}
