/** SQL of public access accounting: counts, last access, cold-mark clearing and TTL renewal. */
import type { Database } from "bun:sqlite";
import { expiryTime, sqlTime } from "../../db/time";
import { COLD_MARK } from "../cleanup-reason";
import { inWriteTransaction } from "../../db/write-transaction";

/**
 * Writes buffered access counts in one transaction. With `renew`, expiry restarts from the last
 * access when that access came before the expiry. An access clears a cold mark only; a superseded
 * image stays on the cleanup list. Returns the ids whose expiry may have moved (with `renew`,
 * those that have a TTL), so cached rows of them can be dropped.
 */
export function applyAccessCounts(db: Database, batch: ReadonlyMap<string, { count: number; last: number }>, renew: boolean): string[] {
  const update = db.query(
    `UPDATE images SET access_count = access_count + ?1, last_public_access_at = ?2,
       pending_cleanup = CASE WHEN ${COLD_MARK} THEN 0 ELSE pending_cleanup END,
       expire_at = CASE WHEN ?3 AND ttl_seconds IS NOT NULL AND expire_at IS NOT NULL AND expire_at > ?2
                        THEN strftime('%Y-%m-%d %H:%M:%S', ?5, '+' || ttl_seconds || ' seconds') ELSE expire_at END
     WHERE id = ?4
     RETURNING ttl_seconds IS NOT NULL AND expire_at IS NOT NULL AS renewable`,
  );
  const renewed: string[] = [];
  inWriteTransaction(db, () => {
    // ?5: the last access rounded up to the second, so a renewed lifetime is never shorter than the TTL.
    for (const [id, { count, last }] of batch) {
      const row = update.get(count, sqlTime(last), renew ? 1 : 0, id, expiryTime(last, 0)) as { renewable: number } | null;
      if (renew && row?.renewable) renewed.push(id);
    }
  });
  return renewed;
}
