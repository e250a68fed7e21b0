import type { Database } from "bun:sqlite";
import type { Logger } from "../ops/log";

/**
 * WAL checkpoints off the event loop. SQLite's automatic checkpoint runs inside whichever
 * commit crosses 1000 WAL pages: that commit copies ~4 MB into the database file and
 * fsyncs it, on the thread that serves requests. Under a stream of uploads that was
 * about a fifth of every upload's time on the loop. Here the server's connection never
 * checkpoints; a Worker with its own connection does, a moment after anything was written.
 *
 * - The worker starts at the first write (an idle server keeps its ~5 MiB).
 * - PASSIVE checkpoints never wait for or block the loop's writes. But under non-stop
 *   writes the WAL is never completely copied at the moment a write begins, so it cannot
 *   start over from its beginning and keeps growing. Past `restartBytes` the worker first
 *   catches up with PASSIVE rounds, then runs a RESTART, which holds writers only while it
 *   copies the few frames left and syncs: the loop's next write waits a few ms, once per
 *   `restartBytes` of WAL.
 * - If the worker fails, SQLite's own automatic checkpoint is switched back on.
 *
 * The worker's code is a string turned into a Blob URL, like the snapshot worker: the
 * single-file build carries it without an extra entry point.
 */
const WORKER_SOURCE = `
import { Database } from "bun:sqlite";
let db;
const run = (mode) => db.query("PRAGMA wal_checkpoint(" + mode + ")").get();
self.onmessage = (event) => {
  const { path, restartFrames, catchUpFrames, restartTries } = event.data;
  try {
    if (!db) {
      db = new Database(path);
      // Never wait inside SQLite: a RESTART that waited for readers while holding the write
      // lock could wait on a loop transaction that itself waits for that lock.
      db.run("PRAGMA busy_timeout = 0");
    }
    // log: frames in the WAL since it last started over.
    let row = run("PASSIVE");
    let restarted = false;
    if (row.log > restartFrames) {
      // Copy without blocking until little is left, so the blocking RESTART is short.
      for (let i = 0; i < 4 && row.log - row.checkpointed > catchUpFrames; i++) row = run("PASSIVE");
      // Busy (a write or a read in progress): try again a millisecond later, not with SQLite's
      // growing sleeps, which miss the short gaps between the loop's commits.
      for (let i = 0; i < restartTries && !restarted; i++) {
        row = run("RESTART");
        restarted = row.busy === 0;
        if (!restarted) Bun.sleepSync(1);
      }
    }
    postMessage({ ok: true, restarted, log: row.log, checkpointed: row.checkpointed });
  } catch (err) {
    postMessage({ ok: false, error: String((err && err.message) || err) });
  }
};`;

export interface CheckpointResult {
  ok: boolean;
  restarted?: boolean;
  log?: number;
  checkpointed?: number;
  error?: string;
}

export interface CheckpointerOptions {
  /** How often the loop looks for new writes (ms). */
  intervalMs?: number;
  /** WAL length (since it last started over) above which the checkpoint restarts it (bytes). */
  restartBytes?: number;
  /** Told of every completed checkpoint (metrics). */
  onCheckpoint?: (mode: CheckpointMode) => void;
}

type CheckpointMode = "PASSIVE" | "RESTART";

/** Frames a RESTART may still have to copy while it holds writers (~1 MiB). */
const CATCH_UP_FRAMES = 256;
/** RESTART attempts per round, a millisecond apart; the next round tries again. */
const RESTART_TRIES = 50;

const SQLITE_DEFAULT_AUTOCHECKPOINT = 1000;

let workerUrl: string | undefined;

export class WalCheckpointer {
  private worker: Worker | undefined;
  private timer: ReturnType<typeof setInterval> | undefined;
  private inFlight = false;
  private lastChanges = 0;
  private failed = false;
  private readonly intervalMs: number;
  private readonly restartFrames: number;
  private readonly onCheckpoint: (mode: CheckpointMode) => void;
  private readonly changes;
  /** For tests and the bench: checkpoints run, and the WAL frames in and copied at the last one. */
  readonly stats = { checkpoints: 0, restarts: 0, walFrames: 0, copiedFrames: 0 };
  /** Resolves the wait of `settle()`. */
  private waiters: Array<() => void> = [];

  constructor(
    private readonly db: Database,
    private readonly log: Pick<Logger, "warn">,
    opts: CheckpointerOptions = {},
  ) {
    this.intervalMs = opts.intervalMs ?? 200;
    const pageSize = (db.query("PRAGMA page_size").get() as { page_size: number }).page_size;
    this.restartFrames = Math.ceil((opts.restartBytes ?? 16 * 1024 * 1024) / pageSize);
    this.onCheckpoint = opts.onCheckpoint ?? (() => {});
    this.changes = db.query<{ n: number }, []>("SELECT total_changes() AS n");
  }

  start() {
    this.db.exec("PRAGMA wal_autocheckpoint = 0");
    this.lastChanges = this.totalChanges();
    this.timer = setInterval(() => this.tick(), this.intervalMs);
    this.timer.unref?.();
  }

  /** Stops checkpointing here; the caller's final checkpoint (shutdown) runs on its own connection. */
  stop() {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    this.worker?.terminate();
    this.worker = undefined;
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

  private request() {
    let worker = this.worker;
    if (!worker) {
      try {
        workerUrl ??= URL.createObjectURL(new Blob([WORKER_SOURCE], { type: "application/javascript" }));
        worker = new Worker(workerUrl);
      } catch (err) {
        this.fallBack((err as Error).message);
        return;
      }
      worker.onmessage = (event: MessageEvent<CheckpointResult>) => this.done(event.data);
      worker.onerror = (event) => this.fallBack(event.message);
      this.worker = worker;
    }
    this.inFlight = true;
    worker.postMessage({ path: this.db.filename, restartFrames: this.restartFrames, catchUpFrames: CATCH_UP_FRAMES, restartTries: RESTART_TRIES });
  }

  private done(result: CheckpointResult) {
    this.inFlight = false;
    if (!result.ok) {
      this.fallBack(result.error ?? "");
      return;
    }
    this.stats.checkpoints++;
    if (result.restarted) this.stats.restarts++;
    this.stats.walFrames = result.log ?? 0;
    this.stats.copiedFrames = result.checkpointed ?? 0;
    this.onCheckpoint(result.restarted ? "RESTART" : "PASSIVE");
    this.release();
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
    this.release();
  }
}
