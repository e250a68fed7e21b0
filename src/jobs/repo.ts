// SQL for the `jobs` table (migrations/0002_jobs.sql). Every statement is a
// single UPDATE/INSERT/DELETE so it is atomic on its own, which is what lets
// several processes poll the same file without an explicit transaction.
//
// Fencing: `attempts` grows by one on every claim, so (id, attempts) names one
// run of a job. A worker whose lease expired and whose job was claimed again
// finds its (id, attempts) no longer matching and its late result is ignored.
import type { Database } from "bun:sqlite";

export type JobState = "available" | "scheduled" | "running" | "retryable" | "completed" | "discarded";

export interface JobRow {
  id: number;
  kind: string;
  payload: string;
  state: JobState;
  attempts: number;
  max_attempts: number;
  run_at: number;
  locked_until: number | null;
  last_error: string | null;
  unique_key: string | null;
  created_at: number;
  updated_at: number;
  finished_at: number | null;
}

export type ClaimedJob = Pick<JobRow, "id" | "kind" | "payload" | "attempts" | "max_attempts">;

export interface NewJob {
  kind: string;
  payload: string;
  state: "available" | "scheduled";
  maxAttempts: number;
  runAt: number;
  uniqueKey: string | null;
  now: number;
}

const UNFINISHED = "('available','scheduled','running','retryable')";
const WAITING = "('available','scheduled','retryable')";
// The ids this process is running right now, as a JSON array parameter. Its own
// in-flight jobs are never reclaimed or swept here even if their lease lapsed:
// they are still running, just slower than the lease.
const NOT_LOCAL = "id NOT IN (SELECT value FROM json_each(?))";

export function isUniqueViolation(err: unknown): boolean {
  return typeof err === "object" && err !== null && (err as { code?: unknown }).code === "SQLITE_CONSTRAINT_UNIQUE";
}

export class JobStore {
  constructor(private readonly db: Database) {}

  get(id: number): JobRow | null {
    return this.db.query<JobRow, [number]>("SELECT * FROM jobs WHERE id = ?").get(id) ?? null;
  }

  findUnfinished(kind: string, uniqueKey: string): number | null {
    const row = this.db
      .query<{ id: number }, [string, string]>(`SELECT id FROM jobs WHERE kind = ? AND unique_key = ? AND state IN ${UNFINISHED}`)
      .get(kind, uniqueKey);
    return row?.id ?? null;
  }

  /** Makes a waiting (scheduled or backing-off) job due now. */
  expedite(id: number, now: number): void {
    this.db
      .query(
        `UPDATE jobs SET run_at = ?1, updated_at = ?1, state = CASE WHEN state = 'scheduled' THEN 'available' ELSE state END
         WHERE id = ?2 AND state IN ('scheduled', 'retryable') AND run_at > ?1`,
      )
      .run(now, id);
  }

  insert(job: NewJob): number {
    const result = this.db
      .query(
        `INSERT INTO jobs (kind, payload, state, attempts, max_attempts, run_at, unique_key, created_at, updated_at)
         VALUES (?, ?, ?, 0, ?, ?, ?, ?, ?)`,
      )
      .run(job.kind, job.payload, job.state, job.maxAttempts, job.runAt, job.uniqueKey, job.now, job.now);
    return Number(result.lastInsertRowid);
  }

  /** Keeps `state` truthful for readers: scheduled jobs whose time has come are available. */
  promoteScheduled(now: number): number {
    return this.db.query("UPDATE jobs SET state = 'available', updated_at = ? WHERE state = 'scheduled' AND run_at <= ?").run(now, now).changes;
  }

  /**
   * A job whose lease lapsed after its last allowed attempt (the process died
   * during it every time) is discarded rather than run again.
   */
  discardExhaustedLeases(now: number, localIds: number[]): Array<Pick<JobRow, "id" | "kind" | "attempts">> {
    return this.db
      .query<Pick<JobRow, "id" | "kind" | "attempts">, [string, number, number, number, string]>(
        `UPDATE jobs SET state = 'discarded', locked_until = NULL, last_error = ?, finished_at = ?, updated_at = ?
         WHERE state = 'running' AND locked_until <= ? AND attempts >= max_attempts AND ${NOT_LOCAL}
         RETURNING id, kind, attempts`,
      )
      .all("租约过期（进程可能已崩溃），且已达最大尝试次数", now, now, now, JSON.stringify(localIds));
  }

  /** Ends the lease of every job marked running (see JobQueue.adoptOrphans); returns how many. */
  expireAllLeases(now: number): number {
    return this.db.query("UPDATE jobs SET locked_until = ?, updated_at = ? WHERE state = 'running' AND locked_until > ?").run(now, now, now).changes;
  }

  /** Atomically takes up to `limit` due jobs of `kind`, including ones whose lease expired. */
  claim(kind: string, now: number, lockedUntil: number, limit: number, localIds: number[]): ClaimedJob[] {
    if (limit <= 0) return [];
    return this.db
      .query<ClaimedJob, [number, number, string, number, number, string, number]>(
        `UPDATE jobs SET state = 'running', attempts = attempts + 1, locked_until = ?, updated_at = ?
         WHERE id IN (
           SELECT id FROM jobs
           WHERE kind = ?
             AND ((state IN ${WAITING} AND run_at <= ?) OR (state = 'running' AND locked_until <= ?))
             AND ${NOT_LOCAL}
           ORDER BY run_at, id
           LIMIT ?)
         RETURNING id, kind, payload, attempts, max_attempts`,
      )
      .all(lockedUntil, now, kind, now, now, JSON.stringify(localIds), limit)
      .sort((a, b) => a.id - b.id);
  }

  /** Heartbeat. False when this run no longer owns the job. */
  extendLease(id: number, attempt: number, lockedUntil: number, now: number): boolean {
    return (
      this.db.query("UPDATE jobs SET locked_until = ?, updated_at = ? WHERE id = ? AND attempts = ? AND state = 'running'").run(lockedUntil, now, id, attempt)
        .changes === 1
    );
  }

  complete(id: number, attempt: number, now: number): boolean {
    return (
      this.db
        .query(
          `UPDATE jobs SET state = 'completed', locked_until = NULL, finished_at = ?, updated_at = ?
           WHERE id = ? AND attempts = ? AND state = 'running'`,
        )
        .run(now, now, id, attempt).changes === 1
    );
  }

  retry(id: number, attempt: number, runAt: number, error: string, now: number): boolean {
    return (
      this.db
        .query(
          `UPDATE jobs SET state = 'retryable', locked_until = NULL, run_at = ?, last_error = ?, updated_at = ?
           WHERE id = ? AND attempts = ? AND state = 'running'`,
        )
        .run(runAt, error, now, id, attempt).changes === 1
    );
  }

  discard(id: number, attempt: number, error: string, now: number): boolean {
    return (
      this.db
        .query(
          `UPDATE jobs SET state = 'discarded', locked_until = NULL, last_error = ?, finished_at = ?, updated_at = ?
           WHERE id = ? AND attempts = ? AND state = 'running'`,
        )
        .run(error, now, now, id, attempt).changes === 1
    );
  }

  /** Shutdown interrupted the run: hand it back without charging the attempt. */
  release(id: number, attempt: number, error: string, now: number): boolean {
    return (
      this.db
        .query(
          `UPDATE jobs SET state = 'available', attempts = attempts - 1, locked_until = NULL, run_at = ?,
             last_error = ?, updated_at = ?
           WHERE id = ? AND attempts = ? AND state = 'running'`,
        )
        .run(now, error, now, id, attempt).changes === 1
    );
  }

  /** Deletes finished jobs older than `cutoff`, in bounded batches so no single write holds the lock long. */
  prune(state: "completed" | "discarded", cutoff: number, batch = 1000): number {
    let total = 0;
    for (;;) {
      const n = this.db
        .query(
          `DELETE FROM jobs WHERE id IN (
             SELECT id FROM jobs WHERE state = ? AND finished_at < ? LIMIT ?)`,
        )
        .run(state, cutoff, batch).changes;
      total += n;
      if (n < batch) return total;
    }
  }

  counts(): { waiting: number; running: number } {
    const row = this.db
      .query<{ waiting: number | null; running: number | null }, []>(
        `SELECT SUM(state IN ${WAITING}) AS waiting, SUM(state = 'running') AS running
         FROM jobs WHERE state IN ${UNFINISHED}`,
      )
      .get();
    return { waiting: row?.waiting ?? 0, running: row?.running ?? 0 };
  }
}
