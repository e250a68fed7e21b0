/**
 * Streaming `aws-chunked` decoder: wraps the raw request body and yields the object bytes.
 * Pull-based, so a slow consumer slows the upload instead of growing memory; the parser holds at
 * most one signed chunk. The stream errors with S3AuthError on any framing, size or signature problem.
 */
import { AwsChunkedParser, type AwsChunkedOptions } from "./aws-chunked-parser";

export type { AwsChunkedOptions, ChunkSigning } from "./aws-chunked-parser";
export { AwsChunkedParser, MAX_LINE_BYTES, DEFAULT_MAX_SIGNED_CHUNK } from "./aws-chunked-parser";

export function decodeAwsChunked(body: ReadableStream<Uint8Array>, opts: AwsChunkedOptions = {}): ReadableStream<Uint8Array> {
  const parser = new AwsChunkedParser(opts);
  const reader = body.getReader();
  let finished = false;
  return new ReadableStream<Uint8Array>(
    {
      async pull(controller) {
        // Read until something can be handed on or the body ends: one pull, one step of progress.
        while (!finished) {
          const { done, value } = await reader.read().catch((err: unknown) => {
            finished = true;
            throw err;
          });
          if (done) {
            finished = true;
            parser.finish();
            controller.close();
            return;
          }
          const out: Uint8Array[] = [];
          try {
            parser.feed(value, out);
          } catch (err) {
            finished = true;
            await reader.cancel(err).catch(() => {});
            throw err;
          }
          for (const piece of out) if (piece.length > 0) controller.enqueue(piece);
          if (out.length > 0) return;
        }
      },
      async cancel(reason) {
        finished = true;
        await reader.cancel(reason);
      },
    },
    { highWaterMark: 0 },
  );
}
