export interface BackoffOptions {
  /** Delay before the first retry, before jitter. */
  baseMs: number;
  /** Upper bound of the un-jittered delay. */
  capMs: number;
}

export const DEFAULT_BACKOFF: BackoffOptions = { baseMs: 2_000, capMs: 60 * 60_000 };

/**
 * Delay after the `attempt`-th failed attempt (1-based): base·2^(attempt-1),
 * capped, then jittered into [d/2, d]. Keeping the lower half avoids a retry
 * storm right after an outage while still spreading workers apart.
 * `random` is injectable so tests can pin the jitter.
 */
export function backoffDelay(attempt: number, opts: BackoffOptions, random: () => number = Math.random): number {
  const exponent = Math.max(0, attempt - 1);
  // 2^exponent overflows to Infinity for huge attempt counts; min() handles it.
  const raw = Math.min(opts.capMs, opts.baseMs * 2 ** exponent);
  const half = raw / 2;
  return Math.round(half + random() * half);
}
