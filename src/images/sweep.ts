import type { AppContext } from "../context";
import { sqlTime } from "../db/time";
import { SYSTEM_ACTOR, audit } from "../ops/audit";
import { deleteReference } from "./delete";

/** Images handled per sweep round, so one round never holds the event loop for long. */
const SWEEP_BATCH = 500;

/**
 * The cleanup sweep (every `cleanup_sweep_seconds`): expired references are deleted like
 * an admin delete (the blob follows after the grace period), with `cold_cleanup_days`
 * set, references not publicly accessed for that long are flagged for the cleanup review,
 * and housekeeping rows past their lifetime are pruned.
 */
export async function sweepRound(app: AppContext, now = Date.now()): Promise<{ expired: number; flagged: number }> {
  // Buffered accesses first: a view shortly before expiry renews the image instead of
  // being lost with it, and a recent view keeps it off the cleanup list.
  app.access.flush();
  const expired = app.db
    .query<{ id: string }, [string, number]>("SELECT id FROM images WHERE expire_at IS NOT NULL AND expire_at <= ? LIMIT ?")
    .all(sqlTime(now), SWEEP_BATCH);
  for (const { id } of expired) {
    if (deleteReference(app, id)) audit(app.db, SYSTEM_ACTOR, "image.expire", id);
  }
  const { flagged } = judgeCold(app, now);
  if (expired.length || flagged) app.log.info("清理扫描完成", { expired: expired.length, flagged });
  pruneHousekeeping(app, now);
  return { expired: expired.length, flagged };
}

/**
 * Re-judges the cleanup list against `cold_cleanup_days`: flags references not publicly
 * accessed for that long and unflags those that no longer qualify (accessed since, or the
 * threshold was raised or set to 0), so the list never goes stale. Each statement names the
 * condition of its partial index (migration 0006; an exempt image is never flagged), so a
 * round touches only the rows that change, not the library.
 */
export function judgeCold(app: Pick<AppContext, "db" | "settings">, now = Date.now()): { flagged: number; unflagged: number } {
  const days = app.settings.get().cold_cleanup_days;
  if (days <= 0) {
    const unflagged = app.db.query("UPDATE images SET pending_cleanup = 0 WHERE pending_cleanup = 1 AND cleanup_exempt = 0").run().changes;
    return { flagged: 0, unflagged };
  }
  const cutoff = sqlTime(now - days * 86_400_000);
  const unflagged = app.db
    .query(
      "UPDATE images SET pending_cleanup = 0 WHERE pending_cleanup = 1 AND cleanup_exempt = 0 AND COALESCE(last_public_access_at, created_at) >= ?",
    )
    .run(cutoff).changes;
  const flagged = app.db
    .query(
      `UPDATE images SET pending_cleanup = 1
       WHERE pending_cleanup = 0 AND cleanup_exempt = 0 AND COALESCE(last_public_access_at, created_at) < ?`,
    )
    .run(cutoff).changes;
  return { flagged, unflagged };
}

/** Rows that only matter for a while: ended sessions, old idempotency keys, audit past its retention. */
function pruneHousekeeping(app: AppContext, now: number) {
  const s = app.settings.get();
  app.sessions.pruneExpired(now);
  app.db.query("DELETE FROM idempotency_keys WHERE created_at < ?").run(sqlTime(now - s.idempotency_key_ttl_hours * 3_600_000));
  app.db.query("DELETE FROM audit WHERE created_at < ?").run(sqlTime(now - s.audit_retention_days * 86_400_000));
}
