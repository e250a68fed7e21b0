import type { AppContext } from "../context";
import { sqlTime } from "../db/time";
import { SYSTEM_ACTOR, audit } from "../ops/audit";
import { expireMultipartUploads } from "../s3/multipart-store";
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
  const expired = app.db
    .query<{ id: string }, [string, number]>("SELECT id FROM images WHERE expire_at IS NOT NULL AND expire_at <= ? LIMIT ?")
    .all(sqlTime(now), SWEEP_BATCH);
  for (const { id } of expired) {
    if (deleteReference(app, id)) audit(app.db, SYSTEM_ACTOR, "image.expire", id);
  }
  let flagged = 0;
  const days = app.settings.get().cold_cleanup_days;
  if (days > 0) {
    const cutoff = sqlTime(now - days * 86_400_000);
    flagged = app.db
      .query(
        `UPDATE images SET pending_cleanup = 1, cleanup_reason = 'cold'
         WHERE pending_cleanup = 0 AND cleanup_exempt = 0 AND COALESCE(last_public_access_at, created_at) < ?`,
      )
      .run(cutoff).changes;
  }
  if (expired.length || flagged) app.log.info("清理扫描完成", { expired: expired.length, flagged });
  pruneHousekeeping(app, now);
  await expireMultipartUploads(app, now);
  return { expired: expired.length, flagged };
}

/** Rows that only matter for a while: ended sessions, old idempotency keys, audit past its retention. */
function pruneHousekeeping(app: AppContext, now: number) {
  const s = app.settings.get();
  app.sessions.pruneExpired(now);
  app.db.query("DELETE FROM idempotency_keys WHERE created_at < ?").run(sqlTime(now - s.idempotency_key_ttl_hours * 3_600_000));
  app.db.query("DELETE FROM audit WHERE created_at < ?").run(sqlTime(now - s.audit_retention_days * 86_400_000));
}
