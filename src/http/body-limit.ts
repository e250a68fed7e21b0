import { jsonError } from "./errors";
import { isS3Path } from "../shared/url-target";

/** Control-plane bodies (JSON, forms) are small; image uploads stream through their own routes instead. */
export const MAX_BODY_BYTES = 1024 * 1024;

/**
 * Small bodies are held in memory whole before a handler sees them, so what all requests hold at
 * once is bounded, overall and per client address: a client sending many bodies slowly (each kept
 * open up to the connection's idle timeout) would otherwise pile up memory until the process dies.
 */
export const SMALL_BODY_TOTAL_BYTES = 64 * 1024 * 1024;
export const SMALL_BODY_PER_CLIENT_BYTES = 4 * 1024 * 1024;
/** A small body arrives whole within this, or the request ends: holding a share of the budget is not free. */
export const SMALL_BODY_DEADLINE_MS = 30_000;

/** Routes that stream their bodies to disk under max_upload_mb themselves. */
const STREAMING_PATHS = new Set(["/api/admin/upload", "/api/upload", "/api/v1/upload", "/api/1/upload"]);

/**
 * Paths whose bodies may be as large as an upload: image uploads, and the S3 surface, which bounds
 * every body itself (objects and parts by max_upload_mb, XML bodies by 1 MiB). All others stay under 1 MiB.
 */
export const takesUploads = (path: string) => STREAMING_PATHS.has(path) || isS3Path(path);

// The unread rest of the body is never wanted: each refusal closes the connection with the answer
// instead of waiting (with the client stuck sending) until the idle timeout, or holding up a graceful stop.
const tooLarge = () => jsonError(413, "请求体过大（最多 1 MiB）", { connection: "close" });
const clientBusy = () => jsonError(429, "该地址同时发送的请求过多，请稍后重试", { connection: "close", "retry-after": "5" });
const serverBusy = () => jsonError(503, "服务器正在接收的请求过多，请稍后重试", { connection: "close", "retry-after": "5" });
const tooSlow = () => jsonError(408, "请求体接收超时", { connection: "close" });
const cutOff = () => jsonError(400, "请求体不完整：客户端中断了连接", { connection: "close" });

/** Bytes of small bodies held at once, overall and per client address. */
export class BodyBudget {
  private total = 0;
  private readonly byClient = new Map<string, number>();

  constructor(
    readonly totalCap = SMALL_BODY_TOTAL_BYTES,
    readonly perClientCap = SMALL_BODY_PER_CLIENT_BYTES,
  ) {}

  /** Takes `bytes` for `client`; nothing is taken when either cap would be passed. */
  take(client: string, bytes: number): "ok" | "client" | "total" {
    const held = this.byClient.get(client) ?? 0;
    if (held + bytes > this.perClientCap) return "client";
    if (this.total + bytes > this.totalCap) return "total";
    this.byClient.set(client, held + bytes);
    this.total += bytes;
    return "ok";
  }

  give(client: string, bytes: number) {
    const left = (this.byClient.get(client) ?? 0) - bytes;
    if (left > 0) this.byClient.set(client, left);
    else this.byClient.delete(client);
    this.total -= bytes;
  }

  /** What is held now (for tests and metrics): overall, and the number of clients holding any. */
  held(): { bytes: number; clients: number } {
    return { bytes: this.total, clients: this.byClient.size };
  }
}

/** The request to route (its body read and bounded), and what to call once its answer is done. */
export interface BoundedRequest {
  request: Request;
  release: () => void;
}

const nothingHeld = () => {};

/**
 * The router buffers bodies whole, so every request except the streaming uploads is bounded
 * before it gets there: a declared length above the cap is refused unread, and any body is read
 * here, within SMALL_BODY_DEADLINE_MS, counted against the budget while it is held (until
 * `release`). Returns the request to route (re-built around the bytes) or the refusal.
 */
export async function boundSmallBody(
  request: Request,
  path: string,
  budget: BodyBudget,
  client: string,
  deadlineMs = SMALL_BODY_DEADLINE_MS,
): Promise<BoundedRequest | Response> {
  if (!request.body || STREAMING_PATHS.has(path) || isS3Path(path)) return { request, release: nothingHeld };
  const declared = request.headers.get("content-length");
  if (declared !== null && Number(declared) > MAX_BODY_BYTES) return tooLarge();
  const chunks: Uint8Array[] = [];
  let size = 0;
  const refuse = (answer: Response) => {
    budget.give(client, size);
    return answer;
  };
  const reader = request.body.getReader();
  let late = false;
  let whole = false;
  // Cancelling ends the pending read (done, or an error): the loop below then answers 408.
  const timer = setTimeout(() => {
    late = true;
    void reader.cancel().catch(() => {});
  }, deadlineMs);
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (late) return refuse(tooSlow());
      if (done) break;
      if (size + value.length > MAX_BODY_BYTES) return refuse(tooLarge());
      const taken = budget.take(client, value.length);
      if (taken !== "ok") return refuse(taken === "client" ? clientBusy() : serverBusy());
      size += value.length;
      chunks.push(value);
    }
    whole = true;
  } catch {
    if (late) return refuse(tooSlow());
    // The client closed the connection mid-body: nobody is there to read an answer, and it is no
    // crash of ours (it was an ERROR line and a 500, free for anyone to cause).
    return refuse(cutOff());
  } finally {
    clearTimeout(timer);
    // A refusal reads no further.
    if (!whole) void reader.cancel().catch(() => {});
  }
  let released = false;
  return {
    request: new Request(request, { body: Buffer.concat(chunks) }),
    release: () => {
      if (released) return;
      released = true;
      budget.give(client, size);
    },
  };
}
