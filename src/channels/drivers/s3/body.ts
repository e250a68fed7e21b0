/**
 * Reading an S3 peer's response bodies. The request itself is guarded by the client (timeouts,
 * `networkError`), but a body can still break off after the headers: Bun then throws its own
 * English text ("ECONNRESET: The socket connection was closed unexpectedly. For more information,
 * pass `verbose: true` …"), which would reach a channel's `last_error`, alerts, webhooks and the
 * log as it is. Here such failures become the shared Chinese transport error.
 */
import { readBoundedText } from "../../../shared/bounded-read";
import { ANSWER_MAX_BYTES, answerTooLarge, bodyReadError } from "../driver-errors";
import { mapStreamErrors } from "../../../shared/mapped-stream";

/** One list page's text; a page of 1000 keys is about 300 KB, far below the bound. */
export async function readListBody(response: Response): Promise<string> {
  try {
    return await readBoundedText(response, ANSWER_MAX_BYTES, answerTooLarge("S3 列表", ANSWER_MAX_BYTES));
  } catch (err) {
    throw bodyReadError(err, "S3");
  }
}

/** The same bytes, failing with bodyReadError's words instead of the runtime's. */
export function withReadErrorsMapped(body: ReadableStream<Uint8Array>): ReadableStream<Uint8Array> {
  // Pull only on demand, so the idle deadline underneath still times only the peer.
  return mapStreamErrors(body, (err) => bodyReadError(err, "S3"), { highWaterMark: 0 });
}
