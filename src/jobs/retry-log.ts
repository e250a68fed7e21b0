/**
 * Which job retries get a WARN line: the first of each kind and reason, then one a minute with how
 * many were held back. A channel gone bad fails every job bound for it with the same reason: 21 blobs
 * to a dead channel wrote 89 lines in 13 minutes, up to 10 per blob, while channel_unhealthy already
 * said it. A new reason is logged at once; a job given up is always logged (by the queue).
 */
export const RETRY_LOG_INTERVAL_MS = 60_000;
/** Reasons remembered at once; past this the oldest is forgotten (it is then logged again when it recurs). */
const MAX_REASONS = 256;

export class RetryLog {
  readonly #reasons = new Map<string, { loggedAt: number; held: number }>();

  constructor(private readonly now: () => number) {}

  /** Whether this retry gets its line; if so, how many of the same kind and reason were held back since the last one. */
  admit(kind: string, reason: string): { log: boolean; heldBack: number } {
    const key = `${kind}\0${reason}`;
    const now = this.now();
    const seen = this.#reasons.get(key);
    if (seen && now - seen.loggedAt < RETRY_LOG_INTERVAL_MS) {
      seen.held++;
      return { log: false, heldBack: 0 };
    }
    this.#reasons.delete(key);
    if (this.#reasons.size >= MAX_REASONS) this.#reasons.delete(this.#reasons.keys().next().value as string);
    this.#reasons.set(key, { loggedAt: now, held: 0 });
    return { log: true, heldBack: seen?.held ?? 0 };
  }
}
