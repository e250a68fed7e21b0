/**
 * The same bytes, with a read error of the source replaced by `onError(err)` (which may also just
 * note it and give it back). Cancelling passes through. `highWaterMark: 0` pulls only when the
 * consumer asks, so a deadline underneath keeps timing the source alone.
 */
export function mapStreamErrors(
  source: ReadableStream<Uint8Array>,
  onError: (err: unknown) => unknown,
  opts: { highWaterMark?: number } = {},
): ReadableStream<Uint8Array> {
  const reader = source.getReader();
  return new ReadableStream<Uint8Array>(
    {
      async pull(out) {
        try {
          const { done, value } = await reader.read();
          if (done) out.close();
          else out.enqueue(value);
        } catch (err) {
          out.error(onError(err));
        }
      },
      cancel(reason) {
        return reader.cancel(reason);
      },
    },
    opts.highWaterMark === undefined ? undefined : { highWaterMark: opts.highWaterMark },
  );
}
