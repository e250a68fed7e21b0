/** Buckets kept before the first prune; afterwards a prune runs when the map has doubled since the last. */
const PRUNE_FLOOR = 10_000;
/** Hard bound: beyond it the least recently used buckets go, full or not (address churn at scale). */
export const MAX_BUCKETS = 100_000;
/**
 * A take this long after the last prune prunes again, whatever the size: after a flood the map
 * would otherwise keep its buckets (full long ago) until it doubled, which the bound never lets
 * it do. One walk of at most MAX_BUCKETS entries (a few ms) every ten minutes.
 */
export const PRUNE_INTERVAL_MS = 10 * 60_000;

/**
 * Token bucket per key (login: client address + user name). `take` returns 0 when
 * allowed, else the seconds until one token is available (for Retry-After).
 *
 * Memory is bounded under address churn without a scan per request: full buckets are pruned
 * when the map has doubled since the last prune (amortized O(1) per take), and the map never
 * holds more than MAX_BUCKETS (the least recently used go first; the map's order is recency).
 */
export class TokenBucketLimiter {
  private readonly buckets = new Map<string, { tokens: number; at: number }>();
  private pruneAt: number;
  private prunedAt: number;

  constructor(
    private burst: number,
    private refillSeconds: number,
    private readonly now: () => number = Date.now,
    private readonly maxBuckets = MAX_BUCKETS,
  ) {
    this.pruneAt = Math.min(PRUNE_FLOOR, maxBuckets);
    this.prunedAt = now();
  }

  get size(): number {
    return this.buckets.size;
  }

  take(key: string): number {
    const now = this.now();
    const bucket = this.buckets.get(key) ?? { tokens: this.burst, at: now };
    const refilled = Math.min(this.burst, bucket.tokens + (now - bucket.at) / 1000 / this.refillSeconds);
    // Deleted and set again, so the map's order is least recently used first.
    this.buckets.delete(key);
    if (refilled < 1) {
      this.buckets.set(key, { tokens: refilled, at: now });
      this.bound(now);
      return Math.max(1, Math.ceil((1 - refilled) * this.refillSeconds));
    }
    this.buckets.set(key, { tokens: refilled - 1, at: now });
    this.bound(now);
    return 0;
  }

  /**
   * New burst and refill period for every bucket, keeping what each has left: a raise adds the
   * difference, a cut never adds anything. Starting every bucket full again (a new limiter) let a
   * change and its undo hand out a whole extra burst.
   */
  resize(burst: number, refillSeconds: number): void {
    const grown = Math.max(0, burst - this.burst);
    for (const bucket of this.buckets.values()) bucket.tokens = Math.min(burst, bucket.tokens + grown);
    this.burst = burst;
    this.refillSeconds = refillSeconds;
  }

  /** Gives back a token taken for an attempt that turned out legitimate (never above the burst). */
  refund(key: string): void {
    const bucket = this.buckets.get(key);
    if (bucket) bucket.tokens = Math.min(this.burst, bucket.tokens + 1);
  }

  private bound(now: number) {
    if (this.buckets.size > this.pruneAt || now - this.prunedAt >= PRUNE_INTERVAL_MS) {
      this.prune(now);
      this.prunedAt = now;
      // Never above the bound: at the bound full buckets go before any that still count.
      this.pruneAt = Math.min(this.maxBuckets, Math.max(PRUNE_FLOOR, 2 * this.buckets.size));
    }
    if (this.buckets.size <= this.maxBuckets) return;
    // A tenth at once: each walk from the front also steps over the entries deleted before, so
    // evicting one per take would be a scan per take again.
    const keep = Math.floor(this.maxBuckets * 0.9);
    for (const key of this.buckets.keys()) {
      if (this.buckets.size <= keep) break;
      this.buckets.delete(key);
    }
  }

  /** Drops full buckets: forgetting them changes nothing (a new bucket starts full). */
  private prune(now: number) {
    for (const [key, b] of this.buckets) {
      if (b.tokens + (now - b.at) / 1000 / this.refillSeconds >= this.burst) this.buckets.delete(key);
    }
  }
}
