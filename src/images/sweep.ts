import type { AppContext } from "../context";
import { drainInSlices } from "../db/sliced";
import { sqlTime } from "../db/time";
import { SYSTEM_ACTOR, audit } from "../ops/audit";
import { pruneAuditBatch } from "../ops/repo";
import { deleteReference } from "./delete";
import { expiredImageIds, flagColdBatch, unflagColdBatch } from "./repos/cleanup";
import { pruneIdempotencyKeys } from "./repos/idempotency";

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
  const expired = expiredImageIds(app.db, sqlTime(now), SWEEP_BATCH);
  for (const [n, { id }] of expired.entries()) {
    if (deleteReference(app, id)) audit(app.db, SYSTEM_ACTOR, "image.expire", id);
    // Each delete is its own small transaction; requests get the loop between every few.
    if (n % 50 === 49) await Bun.sleep(0);
  }
  const { flagged } = await judgeCold(app, now);
  if (expired.length || flagged) app.log.info("清理扫描完成", { expired: expired.length, flagged });
  await pruneHousekeeping(app, now);
  return { expired: expired.length, flagged };
}

/**
 * Rows re-flagged per statement. Each row moves between two partial indexes of a large table
 * (random pages), ~0.1 ms a row at a million images, so a statement stays a few milliseconds
 * and drainInSlices groups statements into ~10 ms slices.
 */
const JUDGE_STEP = 50;

/**
 * Re-judges the cleanup list against `cold_cleanup_days`: flags references not publicly
 * accessed for that long and unflags those that no longer qualify (accessed since, or the
 * threshold was raised or set to 0), so the list never goes stale. Only cold marks are
 * re-decided: a superseded image stays listed whatever its accesses. Each statement names the
 * condition of its partial index (migration 0007; an exempt image is never flagged) and
 * changes at most JUDGE_STEP rows; statements run in ~10 ms slices with a turn of the loop
 * between (db/sliced.ts). A settings save runs the first slice in its own request, so a small
 * library's list changes at once, while a million images' re-judge costs that request ~10 ms
 * and delivery never waits long for it: a round costs the rows that change, in small steps,
 * never a pass over the library.
 */
export async function judgeCold(app: Pick<AppContext, "db" | "settings">, now = Date.now()): Promise<{ flagged: number; unflagged: number }> {
  // Only the newest run goes on: a save of 1 then 0 would otherwise leave the first run
  // flagging (with its old cutoff) what the second unflags, for as long as both last.
  const run = (judgeRuns.get(app.db) ?? 0) + 1;
  judgeRuns.set(app.db, run);
  const stopped = () => judgeRuns.get(app.db) !== run;
  const days = app.settings.get().cold_cleanup_days;
  const cutoff = days > 0 ? sqlTime(now - days * 86_400_000) : undefined;
  const unflagged = await drainInSlices(app.db, (limit) => unflagColdBatch(app.db, cutoff, limit), JUDGE_STEP, { stopped });
  const flagged = cutoff ? await drainInSlices(app.db, (limit) => flagColdBatch(app.db, cutoff, limit), JUDGE_STEP, { stopped }) : 0;
  return { flagged, unflagged };
}

/** The number of the newest re-judge per database (judgeCold). */
const judgeRuns = new WeakMap<object, number>();

/** Audit entries deleted per statement: each row leaves the table and four indexes (random pages). */
const AUDIT_PRUNE_STEP = 200;

/**
 * Rows that only matter for a while: ended sessions, old idempotency keys, audit past its
 * retention. The audit prune runs in ~10 ms slices (db/sliced.ts): a lowered
 * `audit_retention_days` on a million-row log, or the first sweep after an outage, has
 * hundreds of thousands of rows to drop.
 */
async function pruneHousekeeping(app: AppContext, now: number) {
  const s = app.settings.get();
  app.sessions.pruneExpired(now);
  pruneIdempotencyKeys(app.db, sqlTime(now - s.idempotency_key_ttl_hours * 3_600_000));
  const before = sqlTime(now - s.audit_retention_days * 86_400_000);
  await drainInSlices(app.db, (limit) => pruneAuditBatch(app.db, before, limit), AUDIT_PRUNE_STEP);
}
