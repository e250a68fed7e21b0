import type { Database } from "bun:sqlite";
import { bulkWriteBegins, yieldToCheckpointer } from "./checkpointer";
import { inWriteTransaction } from "./write-transaction";

/** How long one slice may hold the event loop (and the write lock) before it yields. */
export const SLICE_MS = 10;

/**
 * Runs `step(limit)` (changes at most `limit` rows, returns how many it changed) until a step
 * changes fewer than `limit`, in time slices: each slice is one transaction of steps, then the
 * loop yields a whole turn (a timer), so requests are answered between slices. The number of
 * steps per slice is fitted to `sliceMs` from the last slice's time, its commit included: at a
 * million images the commit of the pages a slice dirtied (random pages of a large table and its
 * indexes) costs more than the statements, so a slice cut by the statements' time alone held the
 * loop 30-170 ms. A step must be small (`limit` rows of indexed work): the longest pause is about
 * one slice, whatever the number of rows to change in all. Each slice commits, so work cut short
 * by a stop keeps what was done. `stopped()` ends the drain between slices. Returns the rows
 * changed in all. A drain is a background bulk writer: when the WAL is long and due to start over,
 * a slice first waits (bounded) for the checkpointer's worker to copy it (src/db/checkpointer.ts),
 * so the loop does not have to finish the copy and fsync the database file itself.
 */
export async function drainInSlices(
  db: Database,
  step: (limit: number) => number,
  limit: number,
  opts: { sliceMs?: number; stopped?: () => boolean } = {},
): Promise<number> {
  const sliceMs = opts.sliceMs ?? SLICE_MS;
  let total = 0;
  let steps = 1;
  const ended = bulkWriteBegins(db);
  try {
    for (;;) {
      // Checked before each slice (so also after each yield): a drain made stale by newer work ends.
      if (opts.stopped?.()) return total;
      const turn = yieldToCheckpointer(db);
      if (turn) {
        await turn; // then `stopped()` again: the wait may have been long
        continue;
      }
      const started = performance.now();
      const done = inWriteTransaction(db, () => {
        for (let i = 0; i < steps; i++) {
          const changed = step(limit);
          total += changed;
          if (changed < limit) return true;
        }
        return false;
      });
      if (done) return total;
      const took = performance.now() - started;
      // At most twice as many steps as the last slice, at least one.
      steps = Math.max(1, Math.min(steps * 2, Math.floor((steps * sliceMs) / Math.max(took, 0.1))));
      await Bun.sleep(1);
    }
  } finally {
    ended();
  }
}

/**
 * Yields the loop once the work since the last yield ran for `sliceMs`: for walks of small
 * synchronous steps that are not one transaction each (a search's index walk, a batch of
 * deletes, an S3 listing's probes). Call `step()` before each unit of work.
 */
export class Slicer {
  private started = performance.now();

  constructor(private readonly sliceMs = SLICE_MS) {}

  async step(): Promise<void> {
    if (performance.now() - this.started < this.sliceMs) return;
    await Bun.sleep(1);
    this.started = performance.now();
  }
}
