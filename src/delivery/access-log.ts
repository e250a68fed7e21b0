import type { Database } from "bun:sqlite";
import { applyAccessCounts } from "../images/repos/access";

/**
 * Public access counts are buffered in memory and written in one transaction every
 * `activity_flush_seconds`, so serving an image never waits for a database write.
 */
export class AccessBuffer {
  private pending = new Map<string, { count: number; last: number }>();

  constructor(
    private readonly db: Database,
    private readonly renewOnAccess: () => boolean,
    /** Told of images whose expiry a flush may have renewed: cached rows of them are stale. */
    private readonly onRenewed: (imageId: string) => void,
  ) {}

  record(imageId: string, now = Date.now()) {
    this.add(imageId, 1, now);
  }

  /** `count` accesses, the last at `last` (a delivery thread's report). */
  add(imageId: string, count: number, last: number) {
    const entry = this.pending.get(imageId);
    if (entry) {
      entry.count += count;
      entry.last = Math.max(entry.last, last);
    } else this.pending.set(imageId, { count, last });
  }

  /**
   * Writes the buffered counts. With ttl_renew_on_access, expiry restarts from the last access
   * when that access came before the expiry: judged at the access time, not the flush time, so
   * a view in the last flush period before expiry still renews. A public access also takes the
   * image off the cleanup list: it is not cold any more.
   */
  flush() {
    if (this.pending.size === 0) return;
    const batch = this.pending;
    this.pending = new Map();
    let renewed: string[];
    try {
      renewed = applyAccessCounts(this.db, batch, this.renewOnAccess());
    } catch (err) {
      // One transaction wrote nothing (the database locked, the disk failing): the counts wait
      // for the next flush, each with its own last access, instead of being lost.
      for (const [id, { count, last }] of batch) this.add(id, count, last);
      throw err;
    }
    for (const id of renewed) this.onRenewed(id);
  }
}
