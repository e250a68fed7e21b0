// Concurrency control for variant generation: a semaphore whose size follows the hot-reloaded
// `process_workers`, and single-flight so N requests for the same uncached variant render once.

import { setLongTimeout } from "../jobs/long-timeout";
import { once } from "../shared/once";

/** No slot came free within the wait allowed; the task never ran. */
export class QueueWaitTimeoutError extends Error {
  constructor(readonly waitedMs: number) {
    super(`等待图片处理超时（排队超过 ${waitedMs} 毫秒）`);
    this.name = "QueueWaitTimeoutError";
  }
}

export class WorkLimiter {
  #limit: number;
  #active = 0;
  readonly #waiting: Array<() => void> = [];

  constructor(limit: number) {
    this.#limit = WorkLimiter.#check(limit);
  }

  get limit(): number {
    return this.#limit;
  }
  /** Slots in use (running tasks plus work they asked to hold). */
  get active(): number {
    return this.#active;
  }
  /** Tasks waiting for a slot. */
  get pending(): number {
    return this.#waiting.length;
  }

  /**
   * Takes effect at once: a larger limit starts waiting tasks now; a smaller one lets running
   * tasks finish and starts new ones only when below the new limit.
   */
  setLimit(limit: number): void {
    this.#limit = WorkLimiter.#check(limit);
    this.#drain();
  }

  /**
   * Runs `fn` when a slot is free. The slot is released when `fn` settles and every promise
   * passed to `hold` has settled; that lets a task give up waiting (timeout) and answer its
   * caller while the slot stays taken by work that cannot be interrupted. With `maxWaitMs`, a
   * task that has not got a slot by then leaves the queue and rejects with QueueWaitTimeoutError.
   */
  async run<T>(fn: (hold: (work: Promise<unknown>) => void) => Promise<T> | T, maxWaitMs?: number): Promise<T> {
    await this.#acquire(maxWaitMs);
    const release = once(() => {
      this.#active--;
      this.#drain();
    });
    const held: Promise<unknown>[] = [];
    const hold = (work: Promise<unknown>) => {
      held.push(work.then(noop, noop));
    };
    try {
      return await fn(hold);
    } finally {
      if (held.length === 0) release();
      else void Promise.all(held).then(release);
    }
  }

  /** A slot, or QueueWaitTimeoutError after `maxWaitMs` in the queue (the waiter then leaves it). */
  #acquire(maxWaitMs?: number): Promise<void> {
    if (this.#active < this.#limit && this.#waiting.length === 0) {
      this.#active++;
      return Promise.resolve();
    }
    return new Promise<void>((resolve, reject) => {
      const deadline =
        maxWaitMs === undefined
          ? undefined
          : setLongTimeout(() => {
              const at = this.#waiting.indexOf(start);
              if (at < 0) return;
              this.#waiting.splice(at, 1);
              reject(new QueueWaitTimeoutError(maxWaitMs));
            }, maxWaitMs);
      const start = () => {
        deadline?.clear();
        this.#active++;
        resolve();
      };
      this.#waiting.push(start);
    });
  }

  #drain(): void {
    while (this.#active < this.#limit && this.#waiting.length > 0) this.#waiting.shift()!();
  }

  static #check(limit: number): number {
    if (!Number.isInteger(limit) || limit < 1) throw new RangeError(`并发上限必须是正整数：${limit}`);
    return limit;
  }
}

/** Concurrent callers with the same key share one promise; nothing is kept after it settles. */
export class SingleFlight<K, V> {
  readonly #inflight = new Map<K, Promise<V>>();

  get size(): number {
    return this.#inflight.size;
  }

  has(key: K): boolean {
    return this.#inflight.has(key);
  }

  do(key: K, fn: () => Promise<V> | V): Promise<V> {
    const existing = this.#inflight.get(key);
    if (existing) return existing;
    let promise: Promise<V>;
    try {
      promise = Promise.resolve(fn());
    } catch (err) {
      promise = Promise.reject(err);
    }
    // Errors are not cached: the entry goes away on either outcome, so the next request retries.
    const entry = promise.finally(() => {
      if (this.#inflight.get(key) === entry) this.#inflight.delete(key);
    });
    this.#inflight.set(key, entry);
    return entry;
  }
}

function noop(): void {}
