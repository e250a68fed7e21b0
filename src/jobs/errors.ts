/**
 * Thrown by a handler when retrying cannot help (bad payload, the target no
 * longer exists…): the job is discarded at once instead of backing off.
 */
export class PermanentJobError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "PermanentJobError";
  }
}

/**
 * The reason carried by `ctx.signal` when the queue asks a handler to give up:
 * its own `timeoutMs` elapsed, or shutdown reached its deadline. Callers can
 * tell the two apart (e.g. a drain does not raise an alert for either).
 */
export class JobInterruptedError extends Error {
  constructor(readonly reason: "timeout" | "shutdown") {
    super(reason === "timeout" ? "任务执行超时" : "服务正在关闭，任务被中断");
    this.name = "JobInterruptedError";
  }
}
