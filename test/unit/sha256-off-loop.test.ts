// Upload hashes go to WebCrypto's thread for large bytes. The hash must be that of exactly the
// bytes given, also when they are a view into a larger buffer (a stripped upload is one).
import { expect, test } from "bun:test";
import { createHash } from "node:crypto";
import fc from "fast-check";
import { sha256HexOffLoop } from "../../src/images/upload/prepare";
import { fuzzParams } from "../fuzz/fuzz-support";

const reference = (bytes: Uint8Array) => createHash("sha256").update(bytes).digest("hex");

test("the same hex digest as a plain sha256, below and above the off-loop size, for whole buffers and views", async () => {
  await fc.assert(
    fc.asyncProperty(
      fc.integer({ min: 0, max: 200 * 1024 }),
      fc.integer({ min: 0, max: 4096 }),
      fc.integer({ min: 0, max: 4096 }),
      fc.integer(),
      async (length, before, after, seed) => {
        const whole = Buffer.alloc(before + length + after);
        for (let i = 0; i < whole.length; i++) whole[i] = (i * 31 + seed) & 0xff;
        const view = whole.subarray(before, before + length);
        expect(await sha256HexOffLoop(view)).toBe(reference(view));
      },
    ),
    fuzzParams(),
  );
  for (const size of [0, 1, 64 * 1024 - 1, 64 * 1024, 64 * 1024 + 1, 1024 * 1024]) {
    const bytes = Buffer.alloc(size, 7);
    expect(await sha256HexOffLoop(bytes)).toBe(reference(bytes));
  }
});
