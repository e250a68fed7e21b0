/**
 * Node and Bun fire a timer after 1 ms when asked to wait more than 2^31−1 ms (~24.8 days),
 * and every duration setting may be up to 100 years. Every wait driven by a setting goes
 * through here: a long wait is a chain of maximal timers, so it really lasts `ms`.
 */
export const MAX_TIMER_MS = 2 ** 31 - 1;

export interface LongTimeout {
  clear(): void;
}

/** Calls `fn` once after `ms` (any non-negative finite value; anything else waits the maximum). */
export function setLongTimeout(fn: () => void, ms: number): LongTimeout {
  let remaining = Number.isFinite(ms) ? Math.max(0, ms) : Number.MAX_SAFE_INTEGER;
  let timer: ReturnType<typeof setTimeout>;
  const arm = () => {
    const step = Math.min(remaining, MAX_TIMER_MS);
    remaining -= step;
    timer = setTimeout(() => (remaining > 0 ? arm() : fn()), step);
  };
  arm();
  return { clear: () => clearTimeout(timer) };
}
