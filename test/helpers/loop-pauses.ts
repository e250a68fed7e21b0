/**
 * How long the event loop was held, for the tests that pin time-sliced work (a long statement in one
 * turn stalls every request for all of it). An interval of `everyMs` notes the gap between its ticks:
 * a tick that should come 1 ms after the last but comes 80 ms after it means something held the loop
 * ~80 ms. The longest gap is the loop's longest pause while the probe ran.
 */

/**
 * Starts the probe; the returned `stop()` ends it and gives the longest gap seen between two ticks
 * (or between the start and the first tick), in ms.
 */
export function watchLoopPauses(everyMs = 1): () => number {
  let last = performance.now();
  let longest = 0;
  const probe = setInterval(() => {
    const now = performance.now();
    longest = Math.max(longest, now - last);
    last = now;
  }, everyMs);
  return () => {
    clearInterval(probe);
    return longest;
  };
}

/**
 * Runs `run` under the probe: how long it took (`totalMs`, from the call to its settling) and the
 * loop's longest pause meanwhile. The probe stays on `tailMs` more (5 by default; 0 stops it at once)
 * so a pause that lasts until the run's end is noted too: the tick that ends it comes after the run.
 */
export async function timeWithLoopPauses<T>(
  run: () => Promise<T>,
  { everyMs = 1, tailMs = 5 }: { everyMs?: number; tailMs?: number } = {},
): Promise<{ value: T; totalMs: number; longestPauseMs: number }> {
  const stop = watchLoopPauses(everyMs);
  const started = performance.now();
  let value: T;
  try {
    value = await run();
  } catch (error) {
    stop(); // a failed run leaves no 1 ms interval running into the next test
    throw error;
  }
  const totalMs = performance.now() - started;
  if (tailMs > 0) await Bun.sleep(tailMs);
  return { value, totalMs, longestPauseMs: stop() };
}
