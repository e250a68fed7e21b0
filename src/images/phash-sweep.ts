import type { AppContext } from "../context";
import { sqlTime } from "../db/time";
import { computePhash } from "./jobs";
import { dueUnhashedBlobIds, stillUnhashed } from "./repos/phash";

/** A new blob is hashed once it is this old: similarity detection waits until an upload burst is over. */
export const PHASH_DELAY_MS = 30_000;
/** How often the sweep looks for blobs to hash. */
export const PHASH_SWEEP_MS = 5_000;
/** Blobs hashed per round (each a full decode in the thread pool, one at a time). */
const ROUND_LIMIT = 16;
const RETRY_BASE_MS = 60_000;
const RETRY_CAP_MS = 6 * 3_600_000;

/**
 * Perceptual hashes of new blobs, found through the blobs' own state instead of a queued job
 * per upload: the partial index `blobs_unhashed` (`phash = ''`) is the queue. An upload writes
 * no job row, and a hash costs one UPDATE instead of a job's insert, claim and completion, all
 * of them commits on the loop. The state survives a crash by being the data itself.
 *
 * A blob that cannot be hashed (its bytes unreadable for now, or not decodable) is tried again
 * after 1 min, 2 min, 4 min … up to 6 h; the backoff lives in memory, so a restart tries each
 * once more.
 */
export class PhashSweep {
  private readonly backoff = new Map<number, { attempts: number; notBefore: number }>();

  /** One round at `now`; resolves with what it did. */
  async round(app: AppContext, now = Date.now()): Promise<{ hashed: number; failed: number }> {
    this.forgetSettled(app);
    const due = dueUnhashedBlobIds(app.db, sqlTime(now - PHASH_DELAY_MS), ROUND_LIMIT * 4)
      .filter((id) => (this.backoff.get(id)?.notBefore ?? 0) <= now)
      .slice(0, ROUND_LIMIT);
    let hashed = 0;
    let failed = 0;
    for (const id of due) {
      try {
        await computePhash(app, { blob_id: id });
        this.backoff.delete(id);
        hashed++;
      } catch (err) {
        failed++;
        const attempts = (this.backoff.get(id)?.attempts ?? 0) + 1;
        this.backoff.set(id, { attempts, notBefore: now + Math.min(RETRY_BASE_MS * 2 ** (attempts - 1), RETRY_CAP_MS) });
        if (attempts === 1) app.log.warn("计算感知哈希失败，稍后重试", { blob: id, err: (err as Error).message });
      }
    }
    return { hashed, failed };
  }

  /** Drops the backoff of blobs that no longer wait for a hash: deleted, given up for deletion, or hashed meanwhile. */
  private forgetSettled(app: AppContext) {
    if (this.backoff.size === 0) return;
    const waiting = stillUnhashed(app.db, [...this.backoff.keys()]);
    for (const id of this.backoff.keys()) if (!waiting.has(id)) this.backoff.delete(id);
  }

  /** Blobs currently waiting out a retry delay (tests, metrics). */
  get waitingRetry(): number {
    return this.backoff.size;
  }
}
