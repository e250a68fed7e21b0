import type { Database } from "bun:sqlite";
import { inWriteTransaction } from "./write-transaction";

interface Pending {
  work: () => unknown;
  resolve: (value: unknown) => void;
  reject: (err: unknown) => void;
}

type Outcome = { ok: true; value: unknown } | { ok: false; err: unknown };

/**
 * Group commit: units of work handed in during the same event-loop turn share one SQLite
 * transaction, each inside its own savepoint.
 *
 * Why: an upload's rows touch ~30 B-tree pages (image, blob, replica, jobs, rollups, the
 * FTS index), and every commit writes each dirty page to the WAL. Uploads finishing
 * together mostly dirty the same pages (the tails of the tables and indexes, the rollup
 * rows), so one commit for all of them writes a fraction of the pages. An idle server
 * pays nothing: the turn ends right after the one upload that asked.
 *
 * Semantics per unit are those of its own transaction: a unit that throws is rolled back
 * to its savepoint and only its promise rejects; the others still commit. If the commit
 * itself fails (disk full, I/O error), nothing of the batch is kept and every promise
 * rejects with that error. A promise settles only after the commit, so callers see
 * their rows durable (to the WAL) exactly as with a plain transaction.
 */
export class GroupCommit {
  private queue: Pending[] = [];
  private scheduled = false;

  /** `committed(units)` after each successful commit: the metrics count the batching. */
  constructor(
    private readonly db: Database,
    private readonly committed: (units: number) => void = () => {},
  ) {}

  run<T>(work: () => T): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      this.queue.push({ work, resolve: resolve as (value: unknown) => void, reject });
      if (this.scheduled) return;
      this.scheduled = true;
      // setImmediate runs after the I/O callbacks of this turn: every upload whose write
      // completed in the same turn joins this commit.
      setImmediate(() => this.flush());
    });
  }

  private flush() {
    this.scheduled = false;
    const batch = this.queue;
    this.queue = [];
    const outcomes: Outcome[] = [];
    try {
      inWriteTransaction(this.db, () => {
        for (const unit of batch) outcomes.push(this.savepoint(unit.work));
      });
    } catch (err) {
      // bun:sqlite rolls the whole transaction back when the body or the COMMIT throws.
      for (const unit of batch) unit.reject(err);
      return;
    }
    this.committed(batch.length);
    batch.forEach((unit, i) => {
      const outcome = outcomes[i]!;
      if (outcome.ok) unit.resolve(outcome.value);
      else unit.reject(outcome.err);
    });
  }

  /** A nested bun:sqlite transaction is a SAVEPOINT: a throw undoes this unit only. */
  private savepoint(work: () => unknown): Outcome {
    try {
      return { ok: true, value: inWriteTransaction(this.db, work) };
    } catch (err) {
      return { ok: false, err };
    }
  }
}
