/**
 * Which of many lines saying the same thing get written: the first of each subject and reason, then
 * one a minute with how many were held back; a new reason at once. For failures a broken channel
 * repeats per job or per request: job retries (21 blobs to a dead channel wrote 89 lines in 13
 * minutes while channel_unhealthy already said it), reads failing over (one line per anonymous
 * request for an image on it), renders that found no slot (one line per anonymous cold request).
 */
export const HELD_BACK_INTERVAL_MS = 60_000;
/** Reasons remembered at once; past this the oldest is forgotten (it is then logged again when it recurs). */
const MAX_REASONS = 256;

export class HeldBackLog {
  readonly #reasons = new Map<string, { loggedAt: number; held: number }>();

  constructor(private readonly now: () => number) {}

  /** Whether this event gets its line; if so, how many of the same subject and reason were held back since the last one. */
  admit(subject: string, reason: string): { log: boolean; heldBack: number } {
    const key = `${subject}\0${reason}`;
    const now = this.now();
    const seen = this.#reasons.get(key);
    if (seen && now - seen.loggedAt < HELD_BACK_INTERVAL_MS) {
      seen.held++;
      return { log: false, heldBack: 0 };
    }
    this.#reasons.delete(key);
    if (this.#reasons.size >= MAX_REASONS) this.#reasons.delete(this.#reasons.keys().next().value as string);
    this.#reasons.set(key, { loggedAt: now, held: 0 });
    return { log: true, heldBack: seen?.held ?? 0 };
  }
}
