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
 * - PASSIVE checkpoints never wait for or block the loop's writes. Under non-stop writes
 *   the WAL may never be completely copied at the moment a write begins, so it cannot
 *   restart from its beginning and keeps growing: past `truncateBytes` the worker uses
 *   TRUNCATE, which makes the loop's next write wait for the copy, once.
 * - If the worker fails, SQLite's own automatic checkpoint is switched back on.
 *
 * The worker's code is a string turned into a Blob URL, like the snapshot worker: the
 * single-file build carries it without an extra entry point.
 */
const WORKER_SOURCE = `
import { Database } from "bun:sqlite";
let db;
self.onmessage = (event) => {
  const { path, mode } = event.data;
  try {
    if (!db) {
      db = new Database(path);
      db.run("PRAGMA busy_timeout = 5000");
    }
    const row = db.query("PRAGMA wal_checkpoint(" + mode + ")").get();
    postMessage({ ok: true, busy: row.busy, log: row.log, checkpointed: row.checkpointed });
  } catch (err) {
    postMessage({ ok: false, error: String((err && err.message) || err) });
  }
};`;

export interface CheckpointResult {
  ok: boolean;
  busy?: number;
  log?: number;
  checkpointed?: number;
  error?: string;
}

export interface CheckpointerOptions {
  /** How often the loop looks for new writes (ms). */
  intervalMs?: number;
  /** WAL file size above which the checkpoint is a TRUNCATE (bytes). */
  truncateBytes?: number;
  /** Told of every completed checkpoint (metrics). */
  onCheckpoint?: (mode: CheckpointMode) => void;
}

type CheckpointMode = "PASSIVE" | "TRUNCATE";

const SQLITE_DEFAULT_AUTOCHECKPOINT = 1000;

let workerUrl: string | undefined;

export class WalCheckpointer {
  private worker: Worker | undefined;
  private timer: ReturnType<typeof setInterval> | undefined;
  private inFlight = false;
  private lastChanges = 0;
  private failed = false;
  private readonly intervalMs: number;
  private readonly truncateBytes: number;
  private readonly onCheckpoint: (mode: CheckpointMode) => void;
  private readonly changes;
  /** For tests and the bench: checkpoints run, and the WAL frames in and copied at the last one. */
  readonly stats = { checkpoints: 0, truncates: 0, walFrames: 0, copiedFrames: 0 };
  /** Resolves the wait of `settle()`. */
  private waiters: Array<() => void> = [];

  constructor(
    private readonly db: Database,
    private readonly log: Pick<Logger, "warn">,
    opts: CheckpointerOptions = {},
  ) {
    this.intervalMs = opts.intervalMs ?? 200;
    this.truncateBytes = opts.truncateBytes ?? 64 * 1024 * 1024;
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
    this.request(this.walBytes() > this.truncateBytes ? "TRUNCATE" : "PASSIVE");
  }

  private walBytes(): number {
    const wal = Bun.file(`${this.db.filename}-wal`);
    return wal.size;
  }

  private request(mode: CheckpointMode) {
    let worker = this.worker;
    if (!worker) {
      try {
        workerUrl ??= URL.createObjectURL(new Blob([WORKER_SOURCE], { type: "application/javascript" }));
        worker = new Worker(workerUrl);
      } catch (err) {
        this.fallBack((err as Error).message);
        return;
      }
      worker.onmessage = (event: MessageEvent<CheckpointResult>) => this.done(event.data, mode);
      worker.onerror = (event) => this.fallBack(event.message);
      this.worker = worker;
    }
    this.inFlight = true;
    worker.postMessage({ path: this.db.filename, mode });
  }

  private done(result: CheckpointResult, mode: CheckpointMode) {
    this.inFlight = false;
    if (!result.ok) {
      this.fallBack(result.error ?? "");
      return;
    }
    this.stats.checkpoints++;
    if (mode === "TRUNCATE") this.stats.truncates++;
    this.stats.walFrames = result.log ?? 0;
    this.stats.copiedFrames = result.checkpointed ?? 0;
    this.onCheckpoint(mode);
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
