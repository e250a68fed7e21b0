/**
 * Reading the rest of a refused body before the connection closes, as nginx's lingering close does.
 *
 * Some answers come before the body is read: a 413 on the declared length, a 401 or 403 before the
 * upload's bytes (spec: authenticate first). When such an answer also closes the connection (the
 * tool surfaces always do, see tool-surfaces.ts; a refused body does), the kernel resets a connection
 * that still has unread bytes, and a client still sending fails its write: nginx and Caddy relaying
 * an upload answered 502 or broke the stream about half the time, instead of passing on the 413.
 * So a body nobody touched is read and dropped first, bounded: only on the paths that take uploads,
 * a body declared far beyond anything that could be accepted, one that goes silent or takes too long,
 * and drains beyond a few per client address and a few dozen in all are cut off as before.
 */
import { MAX_TIMER_MS } from "../jobs/long-timeout";
import { BodyBudget, takesUploads } from "./body-limit";
import { requestInfo } from "./request-info";
import { closesConnection } from "./tool-surfaces";

/** Beyond the upload cap, this much more is read and dropped at most (an honest client is just over). */
export const LINGER_EXTRA_BYTES = 64 * 1024 * 1024;
/** Silence for this long, or this long in all, and the rest is cut off. */
const LINGER_IDLE_MS = 2_000;
const LINGER_TOTAL_MS = 30_000;
/**
 * Drains at once, in all and per client address (the small bodies' budget, counted in drains): each
 * holds a connection for up to LINGER_TOTAL_MS at a byte a second from its client, so beyond these a
 * refusal closes at once, as before.
 */
const drains = new BodyBudget(32, 2);

/** Whether the answer ends the connection (its own header, or a tool surface's rule). */
export function closesAfter(path: string, response: Response): boolean {
  return closesConnection(path) || response.headers.get("connection")?.toLowerCase() === "close";
}

/** Refusals that shed load: reading their bodies would spend what they are there to save. */
const SHEDDING = new Set([408, 429, 503]);

/**
 * Reads and drops `request`'s body when no one has read any of it and `response` will close the
 * connection: only a body of a declared length up to `maxBytes` (an honest client says what it
 * sends; a chunked or larger one is not waited for), within the deadlines.
 */
export async function drainUnreadBody(request: Request, path: string, response: Response, maxBytes: number): Promise<void> {
  const body = request.body;
  // Only where bodies may be as large as an upload: a proxy relays those; a refused JSON body is small.
  if (!body || request.bodyUsed || body.locked || SHEDDING.has(response.status) || !takesUploads(path)) return;
  const declared = Number(request.headers.get("content-length") ?? Number.NaN);
  if (!(declared > 0 && declared <= maxBytes)) return;
  const client = requestInfo(request).client;
  if (drains.take(client, 1) !== "ok") return;
  try {
    await discard(body, maxBytes);
  } finally {
    drains.give(client, 1);
  }
}

/** Reads and drops up to `maxBytes` of `body` within the deadlines, then cancels the rest. */
async function discard(body: ReadableStream<Uint8Array>, maxBytes: number): Promise<void> {
  const reader = body.getReader();
  const startedAt = Date.now();
  let read = 0;
  try {
    for (;;) {
      const left = Math.min(LINGER_IDLE_MS, LINGER_TOTAL_MS - (Date.now() - startedAt), MAX_TIMER_MS);
      if (left <= 0) return;
      let timer: ReturnType<typeof setTimeout> | undefined;
      const silence = new Promise<undefined>((resolve) => {
        timer = setTimeout(() => resolve(undefined), left);
      });
      const next = await Promise.race([reader.read(), silence]).finally(() => clearTimeout(timer));
      if (next === undefined || next.done) return;
      read += next.value.length;
      if (read > maxBytes) return;
    }
  } catch {
    // The client went away: nothing left to wait for.
  } finally {
    reader.cancel().catch(() => {});
  }
}
