import { jsonError } from "../errors";
import { HANDOVER_COUNTED_HEADER, HANDOVER_PEER_HEADER, HANDOVER_SECRET_HEADER } from "./protocol";

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
  let upstream: Response;
  try {
    upstream = await fetch(request.url, {
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
