// Public types of the job queue (see the comment at the top of queue.ts).
import type { BackoffOptions } from "./backoff";

export type JobLog = (level: "info" | "warn" | "error", msg: string, fields?: Record<string, unknown>) => void;

export interface JobContext {
  id: number;
  kind: string;
  /** 1-based number of this run. */
  attempt: number;
  maxAttempts: number;
  signal: AbortSignal;
  /** Extends the lease to now + ms (default: the kind's lease). False if this run no longer owns the job. */
  heartbeat(ms?: number): boolean;
}

export type JobHandler<P = unknown> = (payload: P, ctx: JobContext) => Promise<void> | void;

export interface KindOptions {
  concurrency?: number;
  maxAttempts?: number;
  backoff?: Partial<BackoffOptions>;
  leaseMs?: number;
  /** Aborts ctx.signal after this long; the handler decides how to stop. */
  timeoutMs?: number;
}

export interface EnqueueOptions {
  runAt?: number;
  delayMs?: number;
  maxAttempts?: number;
  uniqueKey?: string;
  /** With uniqueKey: an existing job that is scheduled or backing off becomes due now. */
  expedite?: boolean;
}

export interface QueueOptions {
  pollMs?: number;
  leaseMs?: number;
  now?: () => number;
  random?: () => number;
  log?: JobLog;
  backoff?: Partial<BackoffOptions>;
  maxAttempts?: number;
  completedRetentionMs?: number;
  discardedRetentionMs?: number;
  pruneEveryMs?: number;
}
