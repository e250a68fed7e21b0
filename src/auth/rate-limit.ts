/**
 * Token bucket per key (login: client address + user name). `take` returns 0 when
 * allowed, else the seconds until one token is available (for Retry-After).
 */
export class TokenBucketLimiter {
  private readonly buckets = new Map<string, { tokens: number; at: number }>();

  constructor(
    private readonly burst: number,
    private readonly refillSeconds: number,
    private readonly now: () => number = Date.now,
  ) {}

  take(key: string): number {
    const now = this.now();
    const bucket = this.buckets.get(key) ?? { tokens: this.burst, at: now };
    const refilled = Math.min(this.burst, bucket.tokens + (now - bucket.at) / 1000 / this.refillSeconds);
    if (refilled < 1) {
      this.buckets.set(key, { tokens: refilled, at: now });
      return Math.max(1, Math.ceil((1 - refilled) * this.refillSeconds));
    }
    this.buckets.set(key, { tokens: refilled - 1, at: now });
    if (this.buckets.size > 10_000) this.prune(now);
    return 0;
  }

  /** Gives back a token taken for an attempt that turned out legitimate (never above the burst). */
  refund(key: string): void {
    const bucket = this.buckets.get(key);
    if (bucket) bucket.tokens = Math.min(this.burst, bucket.tokens + 1);
  }

  /** Drops full buckets so memory stays bounded under address churn. */
  private prune(now: number) {
    for (const [key, b] of this.buckets) {
      if (b.tokens + (now - b.at) / 1000 / this.refillSeconds >= this.burst) this.buckets.delete(key);
    }
  }
}
