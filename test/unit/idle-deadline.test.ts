/**
 * The idle deadline with the longest settings (ops audit M1): `upload_idle_timeout_seconds` may
 * be up to 100 years, and a timer over 2^31-1 ms fires after 1 ms, so every upload whose body
 * needed a second read failed at once with 408. A deadline past the timer range is no deadline.
 */
import { expect, test } from "bun:test";
import { withIdleDeadline } from "../../src/shared/idle-deadline";

/** Two pieces with a pause between them, as any body larger than one read arrives. */
function pausedSource() {
  let step = 0;
  return new ReadableStream<Uint8Array>({
    async pull(c) {
      if (step === 2) return c.close();
      if (step++ === 1) await Bun.sleep(30);
      c.enqueue(new Uint8Array(4));
    },
  });
}

const read = async (stream: ReadableStream<Uint8Array>) => (await new Response(stream).arrayBuffer()).byteLength;

for (const seconds of [2_147_484, 3_153_600_000]) {
  test(`a deadline of ${seconds} s lets a paused body through`, async () => {
    const body = withIdleDeadline(pausedSource(), seconds * 1000, () => new Error("stalled"));
    expect(await read(body)).toBe(8);
  });
}

test("a short deadline still fails a pause longer than itself", async () => {
  const body = withIdleDeadline(pausedSource(), 10, () => new Error("stalled"));
  await expect(read(body)).rejects.toThrow("stalled");
});
