import type { Database } from "bun:sqlite";
import { sqlTime } from "../db/time";
import { COLD_MARK } from "../images/cleanup-reason";

/**
 * Public access counts are buffered in memory and written in one transaction every
 * `activity_flush_seconds`, so serving an image never waits for a database write.
 */
export class AccessBuffer {
  private pending = new Map<string, { count: number; last: number }>();

  constructor(
    private readonly db: Database,
    private readonly renewOnAccess: () => boolean,
  ) {}

  record(imageId: string, now = Date.now()) {
    const entry = this.pending.get(imageId);
    if (entry) {
      entry.count++;
      entry.last = now;
    } else this.pending.set(imageId, { count: 1, last: now });
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
    const renew = this.renewOnAccess();
    // An access clears a cold mark only; a superseded image stays on the cleanup list.
    const update = this.db.query(
      `UPDATE images SET access_count = access_count + ?1, last_public_access_at = ?2,
         pending_cleanup = CASE WHEN ${COLD_MARK} THEN 0 ELSE pending_cleanup END,
         expire_at = CASE WHEN ?3 AND ttl_seconds IS NOT NULL AND expire_at IS NOT NULL AND expire_at > ?2
                          THEN strftime('%Y-%m-%d %H:%M:%S', ?2, '+' || ttl_seconds || ' seconds') ELSE expire_at END
       WHERE id = ?4`,
    );
    this.db.transaction(() => {
      for (const [id, { count, last }] of batch) update.run(count, sqlTime(last), renew ? 1 : 0, id);
    })();
  }
}
