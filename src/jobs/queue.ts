/**
 * Durable job queue in Kura's own SQLite database (table `jobs`, migration 0002).
 *
 *   const q = new JobQueue(db, { pollMs, leaseMs, now, random, log, backoff, maxAttempts,
 *                                completedRetentionMs, discardedRetentionMs });
 *   q.register("replicate", async (payload, ctx) => { ...; ctx.heartbeat(); ... },
 *              { concurrency: 4, maxAttempts: 20, backoff: { baseMs, capMs }, leaseMs, timeoutMs });
 *   inWriteTransaction(db, () => { insertImage(); q.enqueue("replicate", { blobId, channelId },
 *              { uniqueKey: `${blobId}:${channelId}`, delayMs, runAt, maxAttempts }); });
 *   q.start();                       // poll loop; q.wake() polls now instead of at the next tick
 *   await q.stop({ deadlineMs });    // stop polling, wait for running handlers (or until the deadline)
 *   q.counts();                      // { waiting, running } for the kura_queue_jobs_* gauges; throws on DB error
 *
 * Semantics
 * - `enqueue` is synchronous and writes through the caller's `Database`, so it
 *   commits or rolls back with the change that caused the work. It wakes the
 *   poller on a later tick (never inside the caller's transaction).
 * - States: `available` → `running` → `completed`; a future `runAt` starts as
 *   `scheduled`; a failure goes to `retryable` with run_at = now + backoff
 *   (base·2^(n-1), capped, jittered into [d/2, d]); `discarded` once
 *   `max_attempts` runs failed or the handler threw `PermanentJobError`.
 * - Each claim counts as an attempt and takes a lease (`locked_until`). If the
 *   process dies, the job stays `running` until the lease lapses and then any
 *   poller runs it again (at-least-once: handlers must be idempotent). Long
 *   handlers call `ctx.heartbeat()` to extend the lease; it returns false once
 *   the run lost the job. A crash on the last allowed attempt discards the job.
 * - `uniqueKey`: while a job of the same kind and key is unfinished (available,
 *   scheduled, running, retryable), enqueue returns that job's id and adds nothing.
 * - Concurrency is per kind and per process (Kura runs one process).
 * - `ctx.signal` aborts with a `JobInterruptedError` when the kind's `timeoutMs`
 *   elapses or when `stop()` reaches its deadline. A run that then fails because
 *   of shutdown goes back to `available` without spending an attempt.
 * - Completed jobs are deleted after `completedRetentionMs`, discarded ones
 *   after `discardedRetentionMs`.
 * - All times come from `now()` (unix ms), so tests move the clock instead of
 *   sleeping; `processDue()` runs one poll cycle and awaits the jobs it started.
 */
import type { Database } from "bun:sqlite";
import { backoffDelay, DEFAULT_BACKOFF, type BackoffOptions } from "./backoff";
import { FailureLog } from "../ops/repeated-failure";
import { noticeServerFault } from "../ops/server-faults";
import { JobInterruptedError, PermanentJobError } from "./errors";
import { isUniqueViolation, JobStore, type ClaimedJob, type JobRow } from "./repo";
import { HeldBackLog } from "../ops/held-back-log";
import type { EnqueueOptions, JobContext, JobHandler, JobLog, KindOptions, QueueOptions } from "./types";

export { PermanentJobError, JobInterruptedError } from "./errors";
export type { JobRow, JobState } from "./repo";
export type { BackoffOptions } from "./backoff";
export type * from "./types";

interface Kind {
  // biome-ignore lint/suspicious/noExplicitAny: one map holds the handlers of every kind; register() checks each against JobKinds
  handler: JobHandler<any>;
  concurrency: number;
  maxAttempts: number;
  backoff: BackoffOptions;
  leaseMs: number;
  timeoutMs: number | null;
}

interface Run {
  kind: string;
  abort: AbortController;
  done: Promise<void>;
}

const HOUR = 3_600_000;
const MAX_ERROR_CHARS = 1000;

/**
 * `K` maps each job kind to its payload type (the app uses JobKinds from ./kinds),
 * so register and enqueue are checked against the same shape at compile time.
 */
// biome-ignore lint/suspicious/noExplicitAny: the untyped default lets tests queue ad-hoc kinds
export class JobQueue<K extends object = Record<string, any>> {
  private readonly store: JobStore;
  private readonly kinds = new Map<string, Kind>();
  private readonly runs = new Map<number, Run>();
  private readonly active = new Map<string, number>();
  private readonly now: () => number;
  private readonly random: () => number;
  private readonly log: JobLog;
  /** A poll failing every round (the database locked or read-only) is logged once, not every 2 s. */
  private readonly pollFailures: FailureLog;
  /** Which retries get a WARN line (ops/held-back-log.ts). */
  private readonly retryLog: HeldBackLog;
  private readonly pollMs: number;
  private readonly leaseMs: number;
  private readonly backoff: BackoffOptions;
  private readonly maxAttempts: number;
  private readonly completedRetentionMs: number;
  private readonly discardedRetentionMs: number;
  private readonly pruneEveryMs: number;
  private timer: ReturnType<typeof setTimeout> | null = null;
  private running = false;
  private lastPrune = -Infinity;

  constructor(
    private readonly db: Database,
    opts: QueueOptions = {},
  ) {
    this.store = new JobStore(db);
    this.now = opts.now ?? Date.now;
    this.random = opts.random ?? Math.random;
    this.log = opts.log ?? (() => {});
    const log = this.log;
    this.pollFailures = new FailureLog(
      { error: (msg, fields) => log("error", msg, fields), info: (msg, fields) => log("info", msg, fields) },
      "job-queue",
      () => this.now(),
    );
    this.retryLog = new HeldBackLog(() => this.now());
    this.pollMs = positive(opts.pollMs ?? 2_000, "pollMs");
    this.leaseMs = positive(opts.leaseMs ?? 60_000, "leaseMs");
    this.backoff = { ...DEFAULT_BACKOFF, ...opts.backoff };
    this.maxAttempts = positiveInt(opts.maxAttempts ?? 10, "maxAttempts");
    this.completedRetentionMs = opts.completedRetentionMs ?? 24 * HOUR;
    this.discardedRetentionMs = opts.discardedRetentionMs ?? 30 * 24 * HOUR;
    this.pruneEveryMs = opts.pruneEveryMs ?? 60_000;
  }

  /** Register kinds before enqueueing them: the kind's maxAttempts is stored with each job at enqueue. */
  register<T extends keyof K & string>(kind: T, handler: JobHandler<K[T]>, opts: KindOptions = {}): void {
    if (this.kinds.has(kind)) throw new Error(`任务类型 ${kind} 已注册`);
    this.kinds.set(kind, {
      handler,
      concurrency: positiveInt(opts.concurrency ?? 1, "concurrency"),
      maxAttempts: positiveInt(opts.maxAttempts ?? this.maxAttempts, "maxAttempts"),
      backoff: { ...this.backoff, ...opts.backoff },
      leaseMs: positive(opts.leaseMs ?? this.leaseMs, "leaseMs"),
      timeoutMs: opts.timeoutMs === undefined ? null : positive(opts.timeoutMs, "timeoutMs"),
    });
  }

  /** Synchronous; call it inside the transaction that makes the work necessary. Returns the job id. */
  enqueue<T extends keyof K & string>(kind: T, payload: K[T], opts: EnqueueOptions = {}): number {
    if (!kind) throw new Error("任务类型不能为空");
    const json = toJson(payload);
    const now = this.now();
    const runAt = opts.runAt ?? now + (opts.delayMs ?? 0);
    if (!Number.isFinite(runAt)) throw new Error("任务执行时间无效");
    const maxAttempts = positiveInt(opts.maxAttempts ?? this.kinds.get(kind)?.maxAttempts ?? this.maxAttempts, "maxAttempts");
    const uniqueKey = opts.uniqueKey ?? null;
    if (uniqueKey !== null) {
      const existing = this.store.findUnfinished(kind, uniqueKey);
      if (existing !== null) {
        // The cause of a back-off may be gone (a channel healthy again): run the waiting job now.
        if (opts.expedite && runAt <= now) {
          this.store.expedite(existing, now);
          this.wake();
        }
        return existing;
      }
    }
    let id: number;
    try {
      id = this.store.insert({
        kind,
        payload: json,
        state: runAt > now ? "scheduled" : "available",
        maxAttempts,
        runAt: Math.round(runAt),
        uniqueKey,
        now,
      });
    } catch (err) {
      // Another connection inserted the same key between our lookup and our insert.
      const existing = uniqueKey !== null && isUniqueViolation(err) ? this.store.findUnfinished(kind, uniqueKey) : null;
      if (existing === null) throw err;
      return existing;
    }
    if (runAt <= now) this.wake();
    return id;
  }

  /**
   * For a process that owns the database alone (Kura runs one process per data dir): any job
   * still marked running at start was held by a process that died (kill -9, OOM, power loss).
   * Its lease is ended now rather than after up to `leaseMs` (minutes for drains), so the
   * interrupted work is claimed again at once, through the usual lapsed-lease path (attempt
   * counting, fencing, discard on the last attempt). Call before `start()`.
   */
  adoptOrphans(): number {
    const n = this.store.expireAllLeases(this.now());
    if (n > 0) this.log("info", "接管上次进程中断的任务", { jobs: n });
    return n;
  }

  start(): void {
    if (this.running) return;
    this.running = true;
    this.schedule(0);
  }

  /**
   * Stops polling and waits for running handlers. With `deadlineMs`, gives up
   * waiting after that long, aborts their signals and leaves them to the lease.
   */
  async stop(opts: { deadlineMs?: number } = {}): Promise<{ abandoned: number }> {
    this.running = false;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    const pending = [...this.runs.values()].map((r) => r.done);
    if (pending.length === 0) return { abandoned: 0 };
    this.log("info", "任务队列正在停止，等待运行中的任务结束", { running: pending.length });
    const all = Promise.all(pending).then(() => true);
    if (opts.deadlineMs === undefined) {
      await all;
      return { abandoned: 0 };
    }
    let deadline: ReturnType<typeof setTimeout> | undefined;
    const expired = new Promise<false>((resolve) => {
      deadline = setTimeout(() => resolve(false), opts.deadlineMs);
    });
    const finished = await Promise.race([all, expired]);
    clearTimeout(deadline);
    if (finished) return { abandoned: 0 };
    const left = [...this.runs.entries()];
    for (const [, run] of left) run.abort.abort(new JobInterruptedError("shutdown"));
    this.log("warn", "停止期限已到，未完成的任务将在租约到期后重新执行", {
      abandoned: left.length,
      job_ids: left.map(([id]) => id).join(","),
    });
    return { abandoned: left.length };
  }

  /** Poll on the next tick instead of waiting for the interval (no-op unless started). */
  wake(): void {
    if (this.running) this.schedule(0);
  }

  counts(): { waiting: number; running: number } {
    return this.store.counts();
  }

  get(id: number): JobRow | null {
    return this.store.get(id);
  }

  /** One poll cycle, then waits for the jobs it started. Returns how many it started. */
  async processDue(): Promise<number> {
    const started = this.poll();
    await Promise.all(started);
    return started.length;
  }

  /** Deletes finished jobs past their retention. Returns the number deleted. */
  prune(): number {
    const now = this.now();
    this.lastPrune = now;
    return this.store.prune("completed", now - this.completedRetentionMs) + this.store.prune("discarded", now - this.discardedRetentionMs);
  }

  private schedule(ms: number): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = setTimeout(() => this.tick(), ms);
  }

  private tick(): void {
    this.timer = null;
    if (!this.running) return;
    // Someone holds an open transaction on our connection across an await;
    // claiming now would tie our writes to their commit or rollback.
    if (this.db.inTransaction) {
      this.schedule(10);
      return;
    }
    this.poll();
    if (this.running && !this.timer) this.schedule(this.pollMs);
  }

  /** Claims due jobs for every registered kind with free slots and starts them. */
  private poll(): Promise<void>[] {
    const started: Promise<void>[] = [];
    try {
      const now = this.now();
      const local = [...this.runs.keys()];
      this.store.promoteScheduled(now);
      for (const lost of this.store.discardExhaustedLeases(now, local)) {
        this.log("error", "任务租约过期且已达最大尝试次数，已放弃", { job_id: lost.id, kind: lost.kind, attempts: lost.attempts });
      }
      for (const [name, kind] of this.kinds) {
        const free = kind.concurrency - (this.active.get(name) ?? 0);
        for (const job of this.store.claim(name, now, now + kind.leaseMs, free, local)) {
          started.push(this.launch(job, kind));
        }
      }
      if (now - this.lastPrune >= this.pruneEveryMs) this.prune();
      this.pollFailures.succeeded();
    } catch (err) {
      this.pollFailures.failed(err);
      noticeServerFault(err);
    }
    return started;
  }

  private launch(job: ClaimedJob, kind: Kind): Promise<void> {
    this.active.set(job.kind, (this.active.get(job.kind) ?? 0) + 1);
    const abort = new AbortController();
    const ctx: JobContext = {
      id: job.id,
      kind: job.kind,
      attempt: job.attempts,
      maxAttempts: job.max_attempts,
      signal: abort.signal,
      heartbeat: (ms = kind.leaseMs) => {
        const now = this.now();
        return this.store.extendLease(job.id, job.attempts, now + ms, now);
      },
    };
    const done = this.execute(job, kind, ctx, abort).finally(() => {
      this.active.set(job.kind, (this.active.get(job.kind) ?? 1) - 1);
      this.runs.delete(job.id);
      this.wake(); // a slot is free: take the next one without waiting for the interval
    });
    this.runs.set(job.id, { kind: job.kind, abort, done });
    return done;
  }

  private async execute(job: ClaimedJob, kind: Kind, ctx: JobContext, abort: AbortController): Promise<void> {
    const timeout = kind.timeoutMs === null ? undefined : setTimeout(() => abort.abort(new JobInterruptedError("timeout")), kind.timeoutMs);
    let failure: unknown = null;
    try {
      let payload: unknown;
      try {
        payload = JSON.parse(job.payload);
      } catch {
        throw new PermanentJobError("任务参数不是有效的 JSON");
      }
      await kind.handler(payload, ctx);
    } catch (err) {
      failure = err ?? new Error("任务失败");
    } finally {
      clearTimeout(timeout);
    }
    try {
      this.record(job, kind, failure, abort.signal);
    } catch (err) {
      // Typically the database was closed after a shutdown deadline; the lease covers it.
      this.log("error", "记录任务结果失败，租约到期后将重新执行", { job_id: job.id, kind: job.kind, err: errorText(err) });
    }
  }

  private record(job: ClaimedJob, kind: Kind, failure: unknown, signal: AbortSignal): void {
    const now = this.now();
    const fields = { job_id: job.id, kind: job.kind, attempt: job.attempts, max_attempts: job.max_attempts };
    let owned: boolean;
    if (failure === null) {
      owned = this.store.complete(job.id, job.attempts, now);
    } else {
      const error = errorText(failure);
      const shutdown = signal.aborted && signal.reason instanceof JobInterruptedError && signal.reason.reason === "shutdown";
      if (shutdown) {
        owned = this.store.release(job.id, job.attempts, error, now);
        if (owned) this.log("info", "任务因关闭而中断，已放回队列", fields);
      } else if (failure instanceof PermanentJobError || job.attempts >= job.max_attempts) {
        owned = this.store.discard(job.id, job.attempts, error, now);
        if (owned) this.log("error", "任务失败，已放弃", { ...fields, err: error });
      } else {
        const delay = backoffDelay(job.attempts, kind.backoff, this.random);
        owned = this.store.retry(job.id, job.attempts, now + delay, error, now);
        const line = owned ? this.retryLog.admit(job.kind, error) : undefined;
        if (line?.log) this.log("warn", "任务失败，稍后重试", { ...fields, delay_ms: delay, err: error, held_back: line.heldBack });
      }
    }
    if (!owned) this.log("warn", "任务租约已失效，本次结果被忽略", fields);
  }
}

function toJson(payload: unknown): string {
  let json: string | undefined;
  try {
    json = JSON.stringify(payload ?? null);
  } catch {
    json = undefined; // cycles, BigInt
  }
  if (json === undefined) throw new Error("任务参数无法序列化为 JSON");
  return json;
}

function errorText(err: unknown): string {
  const text = err instanceof Error ? err.message || err.name : String(err);
  return text.length > MAX_ERROR_CHARS ? `${text.slice(0, MAX_ERROR_CHARS)}…` : text;
}

function positive(value: number, name: string): number {
  if (!Number.isFinite(value) || value <= 0) throw new Error(`任务队列参数 ${name} 必须是正数`);
  return value;
}

function positiveInt(value: number, name: string): number {
  if (!Number.isInteger(value) || value < 1) throw new Error(`任务队列参数 ${name} 必须是正整数`);
  return value;
}
