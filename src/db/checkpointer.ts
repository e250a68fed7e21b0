import type { Database } from "bun:sqlite";
import type { Logger } from "../ops/log";
import { inlineWorker, onWorkerDeath } from "../shared/inline-worker";

/**
 * WAL checkpoints off the event loop. SQLite's automatic checkpoint runs inside whichever
 * commit crosses 1000 WAL pages: that commit copies ~4 MB into the database file and
 * fsyncs it, on the thread that serves requests. Under a stream of uploads that was
 * about a fifth of every upload's time on the loop. Here the server's connection does not
 * checkpoint on its own; a Worker with its own connection does, a moment after anything
 * was written.
 *
 * - The worker starts at the first write (an idle server keeps its ~5 MiB).
 * - The worker only runs PASSIVE checkpoints: they take no write lock. The loop's
 *   connection stays the only one that ever writes or holds the write lock, which the
 *   code relies on: a transaction that reads and then writes gets SQLITE_BUSY at once,
 *   without waiting, if another connection holds the write lock at that moment (a RESTART
 *   from the worker did exactly that to uploads).
 * - Under non-stop writes the WAL is never completely copied at the moment a write
 *   begins, so it cannot start over from its beginning and would keep growing. Past
 *   `restartBytes` the worker keeps copying until at most `FINISH_FRAMES` are left; then
 *   the loop copies those itself (one PASSIVE with its fsync of the database file), and its
 *   next write starts the WAL over. Once per `restartBytes` of WAL. (The worker's `log` is the
 *   WAL as its round began: under bulk writes the loop also copied all they appended during
 *   that round, 10-16 MiB measured, not the 64 frames.)
 * - Background bulk writers (`drainInSlices`) yield to that: while one writes, a long WAL is
 *   not finished on the loop; the writer's next slice waits (`yieldToCheckpointer`, an await)
 *   and the worker copies everything itself, fsync included, and the loop's next write starts
 *   the WAL over. The loop's finish cost 88-101 ms at a million images while a re-judge wrote
 *   ~2 GB of WAL: the fsync waits for a disk saturated by those very writes. Requests keep
 *   writing meanwhile (small writes the worker catches up with). The wait is bounded
 *   (`YIELD_TIMEOUT_MS`: a reader's old snapshot can keep the worker from copying the end);
 *   past it the loop finishes as before, and bulk writers do not wait again until the WAL
 *   has started over.
 * - If the worker fails, SQLite's own automatic checkpoint is switched back on.
 *
 * The worker's code is a string (src/shared/inline-worker.ts), like the snapshot worker's.
 */
const WORKER_SOURCE = `
import { Database } from "bun:sqlite";
let db;
const passive = () => db.query("PRAGMA wal_checkpoint(PASSIVE)").get();
self.onmessage = (event) => {
  if (event.data.close) {
    db?.close();
    db = undefined;
    postMessage({ closed: true });
    return;
  }
  const { path, restartFrames, finishFrames } = event.data;
  try {
    if (!db) {
      db = new Database(path);
      db.run("PRAGMA busy_timeout = 0");
    }
    // log: frames in the WAL since it last started over; checkpointed: of those, copied.
    let row = passive();
    for (let i = 0; i < 4 && row.log > restartFrames && row.log - row.checkpointed > finishFrames; i++) row = passive();
    postMessage({ ok: true, log: row.log, checkpointed: row.checkpointed });
  } catch (err) {
    postMessage({ ok: false, error: String((err && err.message) || err) });
  }
};`;

export interface CheckpointResult {
  ok: boolean;
  log?: number;
  checkpointed?: number;
  error?: string;
}

/** `copy`: the worker copied WAL frames; `restart`: the loop finished a long WAL so it starts over. */
export type CheckpointKind = "copy" | "restart";

export interface CheckpointerOptions {
  /** How often the loop looks for new writes (ms). */
  intervalMs?: number;
  /** WAL length (since it last started over) past which the loop makes it start over (bytes). */
  restartBytes?: number;
  /** Told of every completed checkpoint (metrics). */
  onCheckpoint?: (kind: CheckpointKind) => void;
  /** Longest a bulk writer waits for the worker to copy a long WAL (ms). */
  yieldTimeoutMs?: number;
}

/** How long `stop()` waits for the worker to close its connection before terminating it anyway. */
const STOP_TIMEOUT_MS = 10_000;

/** Asks the worker to close its connection, then ends the thread (at the latest after `timeoutMs`). */
async function closeWorker(worker: Worker, timeoutMs: number): Promise<void> {
  await new Promise<void>((resolve) => {
    const timer = setTimeout(resolve, timeoutMs);
    worker.onmessage = (event: MessageEvent<{ closed?: boolean }>) => {
      if (!event.data.closed) return;
      clearTimeout(timer);
      resolve();
    };
    worker.onerror = () => {
      clearTimeout(timer);
      resolve();
    };
    worker.postMessage({ close: true });
  });
  worker.terminate();
}

/** Frames the loop may still have to copy itself when it finishes a long WAL (~256 KiB). */
const FINISH_FRAMES = 64;

/** Longest a bulk writer waits for the worker to copy a long WAL before it writes anyway. */
const YIELD_TIMEOUT_MS = 2_000;
/** A bulk writer that began a slice this recently is taken as still writing (a slice, its yield, margin). */
const BULK_RECENT_MS = 100;
/** A worker round that copied nothing while bulk writers wait (a reader's snapshot): the next one after this. */
const RETRY_MS = 5;

/** The running checkpointer of each connection, for the bulk writers that yield to it. */
const running = new WeakMap<Database, WalCheckpointer>();

/**
 * Called by a background bulk writer before each slice. Returns a promise to await before the
 * slice when a long WAL is due to start over, so the worker copies it all and the loop does not
 * have to (see the class comment); undefined otherwise, or when `db` has no checkpointer.
 */
export function yieldToCheckpointer(db: Database): Promise<void> | undefined {
  return running.get(db)?.bulkTurn();
}

/**
 * A background bulk writer begins (`drainInSlices`); call the returned function when it ends.
 * While one is under way a long WAL is left to the worker, however long its slices take (at a
 * million images a commit of a slice took up to ~360 ms on a saturated disk).
 */
export function bulkWriteBegins(db: Database): () => void {
  const checkpointer = running.get(db);
  if (!checkpointer) return () => {};
  checkpointer.bulkWriters++;
  let ended = false;
  return () => {
    if (ended) return;
    ended = true;
    checkpointer.bulkWriters--;
  };
}

const SQLITE_DEFAULT_AUTOCHECKPOINT = 1000;

export class WalCheckpointer {
  private worker: Worker | undefined;
  private timer: ReturnType<typeof setInterval> | undefined;
  private inFlight = false;
  private lastChanges = 0;
  private failed = false;
  private readonly intervalMs: number;
  private readonly yieldTimeoutMs: number;
  private readonly restartFrames: number;
  private readonly onCheckpoint: (kind: CheckpointKind) => void;
  private readonly changes;
  private readonly finishOnLoop;
  /**
   * For tests and the bench: worker checkpoints, WAL restarts, the WAL at the last checkpoint;
   * `loopCopies`: finishes in which the loop copied frames itself (and fsynced), the longest in
   * `loopFinishMs`; `yields`: bulk writer slices that waited, `yieldTimeouts` of them past the bound.
   */
  readonly stats = { checkpoints: 0, restarts: 0, walFrames: 0, copiedFrames: 0, loopCopies: 0, loopFinishMs: 0, yields: 0, yieldTimeouts: 0 };
  /** Resolves the wait of `settle()`. */
  private waiters: Array<() => void> = [];
  /** A long WAL is waiting to start over while bulk writers write: their slices wait. */
  private restartDue = false;
  /** When a bulk writer last began a slice (performance.now()). */
  private bulkAt = Number.NEGATIVE_INFINITY;
  /** A bulk wait timed out: bulk writers no longer wait until the WAL has started over. */
  private yieldOff = false;
  private bulkWaiters: Array<() => void> = [];
  private bulkTimer: ReturnType<typeof setTimeout> | undefined;
  /** Bulk writers under way (`bulkWriteBegins`). */
  bulkWriters = 0;
  /** `total_changes()` when the worker's current round was asked for. */
  private changesAtRequest = 0;

  constructor(
    private readonly db: Database,
    private readonly log: Pick<Logger, "warn">,
    opts: CheckpointerOptions = {},
  ) {
    this.intervalMs = opts.intervalMs ?? 200;
    this.yieldTimeoutMs = opts.yieldTimeoutMs ?? YIELD_TIMEOUT_MS;
    const pageSize = (db.query("PRAGMA page_size").get() as { page_size: number }).page_size;
    this.restartFrames = Math.ceil((opts.restartBytes ?? 16 * 1024 * 1024) / pageSize);
    this.onCheckpoint = opts.onCheckpoint ?? (() => {});
    this.changes = db.query<{ n: number }, []>("SELECT total_changes() AS n");
    this.finishOnLoop = db.query<{ busy: number; log: number; checkpointed: number }, []>("PRAGMA wal_checkpoint(PASSIVE)");
  }

  start() {
    this.db.exec("PRAGMA wal_autocheckpoint = 0");
    this.lastChanges = this.totalChanges();
    this.timer = setInterval(() => this.tick(), this.intervalMs);
    this.timer.unref?.();
    running.set(this.db, this);
  }

  /**
   * Stops checkpointing here; the caller's final checkpoint (shutdown) runs on its own
   * connection. A checkpoint in flight is waited for and the worker's connection closed before
   * its thread goes: a thread terminated inside SQLite keeps the checkpoint lock for good (the
   * final TRUNCATE then finds it busy) and leaves the database file half copied from the WAL.
   */
  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    if (running.get(this.db) === this) running.delete(this.db);
    this.wakeBulk();
    const worker = this.worker;
    this.worker = undefined;
    if (worker) {
      while (this.inFlight) await new Promise<void>((resolve) => this.waiters.push(resolve));
      await closeWorker(worker, STOP_TIMEOUT_MS);
    }
    this.inFlight = false;
    this.release();
  }

  /** Resolves once no checkpoint is running and nothing written is left unrequested (tests). */
  async settle(): Promise<void> {
    for (;;) {
      this.tick();
      if (!this.inFlight) return;
      await new Promise<void>((resolve) => this.waiters.push(resolve));
    }
  }

  /** See `yieldToCheckpointer`. */
  bulkTurn(): Promise<void> | undefined {
    this.bulkAt = performance.now();
    if (!this.restartDue || this.yieldOff || this.failed || !this.timer) return undefined;
    this.stats.yields++;
    if (!this.inFlight) this.request(0);
    this.bulkTimer ??= setTimeout(() => {
      this.yieldOff = true;
      this.stats.yieldTimeouts++;
      this.wakeBulk();
    }, this.yieldTimeoutMs);
    return new Promise<void>((resolve) => this.bulkWaiters.push(resolve));
  }

  /** Whether a long WAL is left to the worker to copy whole: bulk writers are writing (or waiting). */
  private bulkWriting(): boolean {
    return !this.yieldOff && (this.bulkWriters > 0 || this.bulkWaiters.length > 0 || performance.now() - this.bulkAt < BULK_RECENT_MS);
  }

  private wakeBulk() {
    if (this.bulkTimer) clearTimeout(this.bulkTimer);
    this.bulkTimer = undefined;
    const waiters = this.bulkWaiters;
    this.bulkWaiters = [];
    for (const wake of waiters) wake();
  }

  private totalChanges(): number {
    return this.changes.get()?.n ?? 0;
  }

  private tick() {
    if (this.inFlight || this.failed || !this.timer) return;
    const changes = this.totalChanges();
    if (changes === this.lastChanges) return;
    this.lastChanges = changes;
    this.request();
  }

  private request(finishFrames = FINISH_FRAMES) {
    let worker = this.worker;
    if (!worker) {
      try {
        worker = inlineWorker(WORKER_SOURCE);
      } catch (err) {
        this.fallBack((err as Error).message);
        return;
      }
      worker.onmessage = (event: MessageEvent<CheckpointResult>) => this.done(event.data);
      // A worker that dies mid-checkpoint would leave `inFlight` set and stop() waiting forever.
      onWorkerDeath(worker, (reason) => {
        if (this.worker === worker) this.fallBack(reason);
      });
      this.worker = worker;
    }
    this.inFlight = true;
    this.changesAtRequest = this.totalChanges();
    worker.postMessage({ path: this.db.filename, restartFrames: this.restartFrames, finishFrames });
  }

  private done(result: CheckpointResult) {
    this.inFlight = false;
    if (!result.ok || !this.timer) {
      if (!result.ok) this.fallBack(result.error ?? "");
      this.release();
      return;
    }
    const log = result.log ?? 0;
    const copied = result.checkpointed ?? 0;
    const progressed = copied > this.stats.copiedFrames || log < this.stats.walFrames;
    // The loop's connection is the only writer: no change since the request, no frame since.
    const quiet = this.totalChanges() === this.changesAtRequest;
    this.stats.checkpoints++;
    this.stats.walFrames = log;
    this.stats.copiedFrames = copied;
    this.onCheckpoint("copy");
    if (log <= this.restartFrames) {
      // Started over meanwhile (or never long): bulk writers have nothing to wait for.
      if (this.restartDue) {
        this.restartDue = false;
        this.wakeBulk();
      }
    } else if (copied === log && quiet) {
      // The worker copied everything and the loop wrote nothing meanwhile: its next write starts the
      // WAL over. (`log` is the WAL as the worker's checkpoint began: a write during its copy or fsync
      // appends past it, and only a write that begins once all is copied starts the WAL over.)
      this.restarted();
    } else if (this.bulkWriting()) {
      // Bulk writers wait at their next slice; the worker copies the rest, fsync included, not the loop.
      this.restartDue = true;
      if (progressed || !quiet) this.request(0);
      else setTimeout(() => this.retry(), RETRY_MS);
      return;
    } else if (log - copied <= FINISH_FRAMES) {
      this.finish(copied);
    } else {
      this.request(); // the worker fell behind a long WAL: another round at once
      return;
    }
    this.release();
  }

  /** Another worker round for the waiting bulk writers, unless stopped or failed meanwhile (`inFlight` held). */
  private retry() {
    if (this.timer && !this.failed && this.worker) {
      this.request(0);
      return;
    }
    this.inFlight = false;
    this.release();
  }

  /** The loop copies the last few frames itself; everything copied, its next write starts the WAL over. */
  private finish(copiedByWorker: number) {
    let row: { busy: number; log: number; checkpointed: number } | null;
    const started = performance.now();
    try {
      row = this.finishOnLoop.get();
    } catch {
      return; // another checkpointer (a backup's VACUUM does not; a CLI might) holds the lock: next time
    }
    this.stats.loopFinishMs = Math.max(this.stats.loopFinishMs, performance.now() - started);
    if (row && row.checkpointed > copiedByWorker) this.stats.loopCopies++;
    // Not everything copied (a delivery thread still reads an older snapshot): try again later.
    if (row?.busy !== 0 || row.checkpointed !== row.log) return;
    this.restarted();
  }

  /** Everything in a long WAL is copied: the loop's next write starts it over. */
  private restarted() {
    this.stats.restarts++;
    this.onCheckpoint("restart");
    this.restartDue = false;
    this.yieldOff = false;
    this.wakeBulk();
  }

  private release() {
    const waiters = this.waiters;
    this.waiters = [];
    for (const wake of waiters) wake();
  }

  /** Without the worker the WAL would grow without bound: give checkpoints back to SQLite. */
  private fallBack(reason: string) {
    if (this.failed) return;
    this.failed = true;
    this.inFlight = false;
    this.worker?.terminate();
    this.worker = undefined;
    this.db.exec(`PRAGMA wal_autocheckpoint = ${SQLITE_DEFAULT_AUTOCHECKPOINT}`);
    this.log.warn("后台 WAL 检查点线程失败，改由 SQLite 自动检查点", { err: reason });
    this.restartDue = false;
    this.wakeBulk();
    this.release();
  }
}
