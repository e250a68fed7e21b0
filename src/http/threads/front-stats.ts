import type { FrontStats } from "./protocol";

/** Longest a delivery thread keeps counts before reporting them (and how often it reports under load). */
export const REPORT_WINDOW_MS = 20;

/**
 * A delivery thread's access counts and answer metrics, reported to the main thread in
 * batches. The first event after a quiet window is reported at once, before its answer leaves:
 * a client that reads an image and then asks the API for its access count finds it counted as
 * it would with one thread. Under load one report per window carries everything.
 */
export class FrontStatsBatch {
  private access = new Map<string, [string, number, number]>();
  private answers = new Map<string, [string, number, number[]]>();
  private variantHits = 0;
  private lastReport = 0;
  private timer: ReturnType<typeof setTimeout> | undefined;

  constructor(
    private readonly send: (stats: FrontStats) => void,
    private readonly now: () => number = performance.now.bind(performance),
  ) {}

  recordAccess(imageId: string) {
    const entry = this.access.get(imageId);
    const at = Date.now();
    if (entry) {
      entry[1]++;
      entry[2] = at;
    } else this.access.set(imageId, [imageId, 1, at]);
    this.due();
  }

  recordAnswer(method: string, status: number, seconds: number) {
    const key = `${method} ${status}`;
    const entry = this.answers.get(key);
    if (entry) entry[2].push(seconds);
    else this.answers.set(key, [method, status, [seconds]]);
    this.due();
  }

  recordVariantHit() {
    this.variantHits++;
  }

  /** Reports everything now (before stopping). */
  flush() {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    this.lastReport = this.now();
    if (this.access.size === 0 && this.answers.size === 0 && this.variantHits === 0) return;
    this.send({ type: "stats", access: [...this.access.values()], answers: [...this.answers.values()], variantHits: this.variantHits });
    this.access = new Map();
    this.answers = new Map();
    this.variantHits = 0;
  }

  private due() {
    if (this.timer) return;
    const wait = this.lastReport + REPORT_WINDOW_MS - this.now();
    if (wait <= 0) this.flush();
    else this.timer = setTimeout(() => this.flush(), wait);
  }
}
