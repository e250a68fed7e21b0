/**
 * Reading a peer's answer with a bound (src/shared/bounded-read.ts), on random bodies cut into
 * random chunks (fast-check, fixed seed): a body within the bound is returned whole, a longer one
 * is refused after at most bound + one chunk was pulled, and the rest is cancelled, not read.
 */
import { expect, test } from "bun:test";
import fc from "fast-check";
import { readBoundedBytes, readTextPrefix } from "../../src/shared/bounded-read";

/** A body of `chunks`, counting what the reader pulled and whether it was cancelled. */
function body(chunks: Uint8Array[]) {
  const seen = { pulled: 0, cancelled: false };
  let i = 0;
  const stream = new ReadableStream<Uint8Array>({
    pull(c) {
      if (i === chunks.length) return c.close();
      seen.pulled += chunks[i]!.length;
      c.enqueue(chunks[i++]!);
    },
    cancel() {
      seen.cancelled = true;
    },
  });
  return { stream, seen };
}

const chunked = fc.array(fc.uint8Array({ minLength: 1, maxLength: 50 }), { maxLength: 12 });

test("within the bound the whole body; past it a refusal, having pulled at most one chunk too many", async () => {
  await fc.assert(
    fc.asyncProperty(chunked, fc.nat(400), async (chunks, max) => {
      const whole = Buffer.concat(chunks);
      const { stream, seen } = body(chunks);
      const outcome = await readBoundedBytes(stream, max, () => new Error("too large")).then(
        (bytes) => bytes,
        (err: Error) => err,
      );
      if (whole.length <= max) expect(outcome).toEqual(whole);
      else {
        expect(outcome).toBeInstanceOf(Error);
        // Cancelled, unless the source had already ended by itself.
        expect(seen.cancelled || seen.pulled === whole.length).toBe(true);
        expect(seen.pulled).toBeLessThanOrEqual(max + 50);
      }
    }),
    { seed: 20261128, numRuns: 500 },
  );
});

test("an error body's prefix: the first bytes, the rest cancelled", async () => {
  await fc.assert(
    fc.asyncProperty(fc.array(fc.string({ minLength: 1, maxLength: 20 }), { maxLength: 10 }), fc.nat(100), async (pieces, max) => {
      const text = pieces.join("");
      const bytes = Buffer.from(text, "latin1");
      const { stream } = body(pieces.map((p) => Buffer.from(p, "latin1")));
      const prefix = await readTextPrefix(new Response(stream), max);
      expect(prefix).toBe(bytes.subarray(0, max).toString("utf8"));
    }),
    { seed: 1128, numRuns: 300 },
  );
});

test("an error body that breaks off still gives what arrived before", async () => {
  let step = 0;
  const stream = new ReadableStream<Uint8Array>({
    pull(c) {
      if (step++ === 0) c.enqueue(new TextEncoder().encode("<Error><Code>SlowDown</Code>"));
      else c.error(new Error("ECONNRESET"));
    },
  });
  expect(await readTextPrefix(new Response(stream), 65536)).toBe("<Error><Code>SlowDown</Code>");
});
