import type { Database } from "bun:sqlite";
import { isDatabaseLocked } from "../errors";
import { noticeServerFault } from "../ops/server-faults";

/**
 * Runs `work` in a write transaction on Kura's connection: BEGIN IMMEDIATE (a savepoint when
 * nested in another transaction).
 *
 * Why not bun:sqlite's default BEGIN (deferred): a transaction that reads before its first write
 * asks for the write lock only at that write, and SQLite does not wait for a lock it would have to
 * upgrade to (the busy handler runs only for a transaction that holds nothing yet). Another
 * process holding the lock for a moment (an operator's `sqlite3 kura.db` UPDATE, a backup tool)
 * then failed every upload and delete at once with a 503, where single statements waited out the
 * busy timeout and went through. IMMEDIATE takes the lock first, so every write waits alike (and
 * the lock breaker, src/db/lock-breaker.ts, governs them all).
 *
 * A lock still held past the busy timeout is told to the breaker here, as it happens: heard only
 * from the request's or round's error handler, after its cleanup, the next write on the loop (a
 * background round's) waited out a second busy timeout meanwhile.
 */
export function inWriteTransaction<T>(db: Database, work: () => T): T {
  try {
    return db.transaction(work).immediate();
  } catch (err) {
    if (isDatabaseLocked(err)) noticeServerFault(err);
    throw err;
  }
}
