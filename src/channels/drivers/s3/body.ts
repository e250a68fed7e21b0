/**
 * Reading an S3 peer's response bodies. The request itself is guarded by the client (timeouts,
 * `networkError`), but a body can still break off after the headers: Bun then throws its own
 * English text ("ECONNRESET: The socket connection was closed unexpectedly. For more information,
 * pass `verbose: true` …"), which would reach a channel's `last_error`, alerts, webhooks and the
 * log as it is. Here such failures become Chinese reasons without internals.
 */
import { readBoundedText } from "../../../shared/bounded-read";
import { networkFailureReason } from "../driver-errors";
import { BodyStalledError } from "../http-transport";
import { ListPageError } from "./xml";

/** A page of 1000 keys is about 300 KB; a peer sending more than this is not sending a list page. */
export const LIST_PAGE_MAX_BYTES = 8 * 1024 * 1024;

export class ListPageTooLargeError extends Error {
  constructor() {
    super(`S3 列表响应过大（超过 ${LIST_PAGE_MAX_BYTES / 1024 / 1024} MiB）`);
    this.name = "ListPageTooLargeError";
  }
}

/** A failure while reading a body, in words fit for an admin; our own errors pass unchanged. */
export function bodyReadError(err: unknown, origin: string): Error {
  if (err instanceof BodyStalledError || err instanceof ListPageTooLargeError || err instanceof ListPageError) return err;
  return new Error(`S3 读取响应失败: ${origin}: ${bodyFailureReason(err)}`);
}

function bodyFailureReason(err: unknown): string {
  // Bun reports a peer that closed mid-body with this name but sometimes without a code.
  if (/closed unexpectedly/i.test(String((err as Error)?.message))) return "连接被重置";
  if (err instanceof RangeError || /out of memory/i.test(String((err as Error)?.message))) return "响应无法读取";
  return networkFailureReason(err);
}

/** One list page's text, at most LIST_PAGE_MAX_BYTES. */
export async function readListBody(response: Response, origin: string): Promise<string> {
  try {
    return await readBoundedText(response, LIST_PAGE_MAX_BYTES, () => new ListPageTooLargeError());
  } catch (err) {
    throw bodyReadError(err, origin);
  }
}

/** The same bytes, failing with bodyReadError's words instead of the runtime's. */
export function withReadErrorsMapped(body: ReadableStream<Uint8Array>, origin: string): ReadableStream<Uint8Array> {
  const reader = body.getReader();
  return new ReadableStream<Uint8Array>(
    {
      async pull(out) {
        try {
          const { done, value } = await reader.read();
          if (done) out.close();
          else out.enqueue(value);
        } catch (err) {
          out.error(bodyReadError(err, origin));
        }
      },
      cancel(reason) {
        return reader.cancel(reason);
      },
    },
    // Pull only on demand, so the idle deadline underneath still times only the peer.
    { highWaterMark: 0 },
  );
}
