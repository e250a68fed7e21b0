/**
 * Another process holding kura.db's write lock (an operator's `sqlite3 kura.db` left inside a
 * transaction, a tool taking a write lock): bun:sqlite is synchronous, so every write on the event
 * loop waited out the whole busy timeout while nothing else ran, and ten uploads froze delivery
 * for fifty seconds. Once a write has waited in vain (and the lock is still held when the breaker
 * hears of it), the breaker opens: the busy timeout drops to
 * 0, so writes fail at once with the same retryable 503, until a probe (a write lock taken and
 * given back, every `probeMs`) finds the lock free and closes it. The loop's connection is the
 * only writer of the service itself (the checkpoint and backup workers never take the write
 * lock), so an open breaker costs nothing but the waits.
 */
import type { Database } from "bun:sqlite";
import { isDatabaseLocked } from "../errors";
import type { Logger } from "../ops/log";

export const BUSY_TIMEOUT_MS = 5_000;

export class LockBreaker {
  #probe: ReturnType<typeof setInterval> | undefined;

  constructor(
    private readonly db: Database,
    private readonly log: Pick<Logger, "warn" | "info">,
    private readonly probeMs = 1_000,
  ) {}

  get open(): boolean {
    return this.#probe !== undefined;
  }

  /** Told of every server fault a request or a background round met. */
  noticed(err: unknown) {
    if (this.#probe || !isDatabaseLocked(err)) return;
    // At 0 first, so the check below does not itself wait out the busy timeout.
    if (!this.#setBusyTimeout(0)) return; // a closed database: nothing to protect
    if (this.#lockFree()) {
      // A report that arrived after the lock went (a round that finished its other work before it
      // failed): opening now would fail writes for a second with nothing in their way.
      this.#setBusyTimeout(BUSY_TIMEOUT_MS);
      return;
    }
    this.log.warn("数据库被其他进程长时间锁定：锁释放前写入立即失败（503），不再逐个等待", { wait_ms: BUSY_TIMEOUT_MS });
    this.#probe = setInterval(() => this.#check(), this.probeMs);
    this.#probe.unref?.();
  }

  #check() {
    if (!this.#lockFree()) return;
    this.close();
    this.log.info("数据库锁已释放，写入恢复正常");
  }

  /**
   * Whether the write lock can be taken at once (taken and given back). Inside the connection's own
   * transaction it cannot be asked: the answer is no. Any failure other than the lock's counts as
   * free: waiting out the busy timeout again is the normal behaviour for it.
   */
  #lockFree(): boolean {
    try {
      if (this.db.inTransaction) return false;
      this.db.exec("BEGIN IMMEDIATE");
      this.db.exec("ROLLBACK");
    } catch (err) {
      return !isDatabaseLocked(err);
    }
    return true;
  }

  /** Ends its watch of server faults (set by whoever started it). */
  stopWatching: () => void = () => {};

  /** Stops for good: no more watching, no probe left to run on a closed database. */
  dispose() {
    this.stopWatching();
    this.close();
  }

  /** Back to waiting out the busy timeout. */
  close() {
    if (!this.#probe) return;
    clearInterval(this.#probe);
    this.#probe = undefined;
    this.#setBusyTimeout(BUSY_TIMEOUT_MS); // false when closed meanwhile (the service stopping): nothing to restore
  }

  /** Sets the connection's busy timeout; false when the database is closed. */
  #setBusyTimeout(ms: number): boolean {
    try {
      this.db.exec(`PRAGMA busy_timeout = ${ms}`);
      return true;
    } catch {
      return false;
    }
  }
}
