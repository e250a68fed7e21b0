/** How many renders the libvips thread pool takes at once (src/delivery/thread-pool.ts). */
import { expect, test } from "bun:test";
import { availableParallelism } from "node:os";
import { encodesInParallel, renderConcurrency, uvPoolSize } from "../../src/delivery/thread-pool";

test("the pool is UV_THREADPOOL_SIZE when it is a positive integer, else one thread per core", () => {
  expect(uvPoolSize({ UV_THREADPOOL_SIZE: "16" })).toBe(16);
  for (const bad of [undefined, "", "0", "-3", "2.5", "many"]) expect(uvPoolSize({ UV_THREADPOOL_SIZE: bad })).toBe(availableParallelism());
  expect(uvPoolSize({ UV_THREADPOOL_SIZE: "100000" })).toBe(1024); // libuv's own ceiling
});

test("renders leave a pool thread free, but at least one runs", () => {
  expect([1, 2, 3, 4, 16].map((pool) => renderConcurrency(2, pool))).toEqual([1, 1, 2, 2, 2]);
  expect(renderConcurrency(8, 4)).toBe(3);
  // A PNG's two WebP encodes at once only when every render's pair still leaves a thread.
  expect([encodesInParallel(1, 2), encodesInParallel(1, 3), encodesInParallel(2, 4), encodesInParallel(2, 5)]).toEqual([false, true, false, true]);
});

test("an AVIF's output pixels are counted as displayed: a turned panorama's w is its displayed width", async () => {
  const { outputPixels } = await import("../../src/delivery/transform");
  const stored = { format: "jpeg" as const, width: 12_000, height: 3_000 };
  expect(outputPixels(stored, 0)).toBe(36_000_000);
  expect(outputPixels(stored, 1920)).toBe(1920 * 480);
  // Orientation 6: shown 3,000 wide and 12,000 tall; w=1920 keeps 1920 x 7680 (14.7 MP, not 0.9).
  expect(outputPixels({ ...stored, orientation: 6 }, 1920)).toBe(1920 * 7680);
  expect(outputPixels({ ...stored, orientation: 6 }, 4000)).toBe(36_000_000); // never enlarged
  // WebP's orientation tag is not applied (as browsers do not).
  expect(outputPixels({ ...stored, format: "webp" as const, orientation: 6 }, 1920)).toBe(1920 * 480);
});
