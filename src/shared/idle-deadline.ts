import { MAX_TIMER_MS } from "../jobs/long-timeout";

/**
 * A byte stream that fails with `stalled()` when no piece arrives within `idleMs` of being asked
 * for, and then cancels its source (for a peer's response that closes the socket; for a client's
 * request body nothing more is read). Only a read waiting on the source is timed: a consumer that
 * is slow itself (a busy disk) never is, and a slow but steady source passes however long it takes.
 * Shared by the channel drivers' response bodies and the upload surfaces' request bodies.
 *
 * With a `cap`, more than `cap.bytes` in all fails the same way with `cap.over()`: a body that
 * could never be accepted is not read to its end (a chunked upload form with an endless preamble
 * or skipped part would otherwise be read until Bun's own limit of ~10 GiB, holding its slot).
 */
export function withIdleDeadline(
  source: ReadableStream<Uint8Array>,
  idleMs: number,
  stalled: () => Error,
  cap?: { bytes: number; over: () => Error },
): ReadableStream<Uint8Array> {
  const reader = source.getReader();
  let total = 0;
  return new ReadableStream<Uint8Array>(
    {
      async pull(out) {
        let timer: ReturnType<typeof setTimeout> | undefined;
        const deadline = new Promise<never>((_, reject) => {
          // A timer over 2^31-1 ms fires after 1 ms (Bun, as Node): a deadline set to years would
          // fail every read that waits at all. Past ~24.8 days it is as good as none.
          if (idleMs <= MAX_TIMER_MS) timer = setTimeout(() => reject(stalled()), idleMs);
        });
        try {
          const { done, value } = await Promise.race([reader.read(), deadline]);
          if (done) out.close();
          else {
            total += value.length;
            if (cap && total > cap.bytes) throw cap.over();
            out.enqueue(value);
          }
        } catch (err) {
          out.error(err);
          reader.cancel(err).catch(() => {});
        } finally {
          clearTimeout(timer);
        }
      },
      cancel(reason) {
        return reader.cancel(reason);
      },
    },
    // Pull only when the consumer asks, so the clock never runs for bytes nobody wants yet.
    { highWaterMark: 0 },
  );
}
