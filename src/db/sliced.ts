import type { Database } from "bun:sqlite";

/** How long one slice may hold the event loop (and the write lock) before it yields. */
export const SLICE_MS = 10;

/**
 * Runs `step(limit)` (changes at most `limit` rows, returns how many it changed) until a step
 * changes fewer than `limit`, in time slices: each slice is one transaction of steps that ends
 * once it has run for `sliceMs`, then the loop yields a whole turn (a timer), so requests are
 * answered between slices. A step must be small (`limit` rows of indexed work): the longest
 * pause is one slice plus one step, whatever the number of rows to change in all. Each slice
 * commits, so work cut short by a stop keeps what was done. Returns the rows changed in all.
 */
export async function drainInSlices(db: Database, step: (limit: number) => number, limit: number, sliceMs = SLICE_MS): Promise<number> {
  let total = 0;
  for (;;) {
    const done = db.transaction(() => {
      const started = performance.now();
      for (;;) {
        const changed = step(limit);
        total += changed;
        if (changed < limit) return true;
        if (performance.now() - started >= sliceMs) return false;
      }
    })();
    if (done) return total;
    await Bun.sleep(1);
  }
}
