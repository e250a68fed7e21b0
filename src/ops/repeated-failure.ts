/**
 * A background loop's failures without the same ERROR every round. A loop that fails for a reason
 * no round can fix (a file system gone read-only, a disk answering I/O errors) would otherwise
 * write one line a second until someone looks, burying what started it; the operator hears of the
 * first failure, of the same failure again every `repeatMs` with how many rounds it has cost, of a
 * different failure at once, and of the recovery.
 */
import type { Logger } from "./log";

export const REPEAT_FAILURE_LOG_MS = 10 * 60_000;

export class FailureLog {
  #current: { message: string; rounds: number; loggedAt: number } | undefined;

  constructor(
    private readonly log: Pick<Logger, "error" | "info">,
    private readonly loop: string,
    private readonly now: () => number = Date.now,
    private readonly repeatMs = REPEAT_FAILURE_LOG_MS,
  ) {}

  failed(err: unknown) {
    const message = err instanceof Error ? err.message : String(err);
    const now = this.now();
    const current = this.#current;
    if (current?.message !== message) {
      this.#current = { message, rounds: 1, loggedAt: now };
      this.log.error("后台任务执行失败", { loop: this.loop, err: message });
      return;
    }
    current.rounds++;
    if (now - current.loggedAt < this.repeatMs) return;
    current.loggedAt = now;
    this.log.error("后台任务仍在失败", { loop: this.loop, err: message, failed_rounds: current.rounds });
  }

  succeeded() {
    const current = this.#current;
    if (!current) return;
    this.#current = undefined;
    this.log.info("后台任务恢复正常", { loop: this.loop, failed_rounds: current.rounds });
  }
}
