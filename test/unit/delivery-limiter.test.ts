import { afterEach, beforeEach, describe, expect, jest, test } from "bun:test";
import { QueueWaitTimeoutError, SingleFlight, WorkLimiter } from "../../src/delivery/limiter.ts";

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** Runs `n` tasks through the limiter and records the highest number running at once. */
function observe(limiter: WorkLimiter, n: number, ms: number) {
  let running = 0;
  let peak = 0;
  const done = Promise.all(
    Array.from({ length: n }, (_, i) =>
      limiter.run(async () => {
        running++;
        peak = Math.max(peak, running);
        await sleep(ms);
        running--;
        return i;
      }),
    ),
  );
  return { done, peak: () => peak, running: () => running };
}

describe("WorkLimiter", () => {
  test("never runs more than the limit at once, and runs everything", async () => {
    const limiter = new WorkLimiter(3);
    const o = observe(limiter, 20, 5);
    expect(await o.done).toEqual(Array.from({ length: 20 }, (_, i) => i));
    expect(o.peak()).toBe(3);
    expect(limiter.active).toBe(0);
    expect(limiter.pending).toBe(0);
  });

  test("raising the limit at runtime starts waiting tasks at once", async () => {
    const limiter = new WorkLimiter(1);
    const o = observe(limiter, 6, 30);
    await sleep(5);
    expect(o.running()).toBe(1);
    expect(limiter.pending).toBe(5);
    limiter.setLimit(4);
    expect(limiter.limit).toBe(4);
    await sleep(5);
    expect(o.running()).toBe(4);
    await o.done;
    expect(o.peak()).toBe(4);
  });

  test("lowering the limit lets running tasks finish and then holds to the new bound", async () => {
    const limiter = new WorkLimiter(4);
    let running = 0;
    const peaks: number[] = [];
    const task = () =>
      limiter.run(async () => {
        running++;
        peaks.push(running);
        await sleep(15);
        running--;
      });
    const first = Array.from({ length: 4 }, task);
    await sleep(2);
    limiter.setLimit(2);
    const later = Array.from({ length: 6 }, task);
    await Promise.all([...first, ...later]);
    expect(Math.max(...peaks.slice(0, 4))).toBe(4);
    expect(Math.max(...peaks.slice(4))).toBeLessThanOrEqual(2);
  });

  test("errors release the slot and reach the caller", async () => {
    const limiter = new WorkLimiter(1);
    await expect(limiter.run(async () => Promise.reject(new Error("boom")))).rejects.toThrow("boom");
    expect(await limiter.run(() => 7)).toBe(7);
    expect(limiter.active).toBe(0);
  });

  test("held work keeps the slot after the task has answered", async () => {
    const limiter = new WorkLimiter(1);
    let finishWork!: () => void;
    const work = new Promise<void>((r) => (finishWork = r));
    expect(await limiter.run(async (hold) => (hold(work), "answered early"))).toBe("answered early");
    expect(limiter.active).toBe(1);
    let secondStarted = false;
    const second = limiter.run(() => {
      secondStarted = true;
    });
    await sleep(5);
    expect(secondStarted).toBe(false);
    finishWork();
    await second;
    expect(secondStarted).toBe(true);
  });

  test("rejects nonsense limits", () => {
    expect(() => new WorkLimiter(0)).toThrow(RangeError);
    expect(() => new WorkLimiter(1).setLimit(1.5)).toThrow(RangeError);
  });
});

describe("SingleFlight", () => {
  test("100 concurrent callers for one key share a single run", async () => {
    const sf = new SingleFlight<string, number>();
    let calls = 0;
    const results = await Promise.all(
      Array.from({ length: 100 }, () =>
        sf.do("k", async () => {
          calls++;
          await sleep(10);
          return 42;
        }),
      ),
    );
    expect(calls).toBe(1);
    expect(results.every((r) => r === 42)).toBe(true);
    expect(sf.size).toBe(0); // removed once settled
  });

  test("different keys run independently", async () => {
    const sf = new SingleFlight<string, string>();
    let calls = 0;
    const r = await Promise.all(["a", "b", "a", "c", "b"].map((k) => sf.do(k, async () => (calls++, await sleep(5), k.toUpperCase()))));
    expect(r).toEqual(["A", "B", "A", "C", "B"]);
    expect(calls).toBe(3);
  });

  test("errors are shared by concurrent callers but not cached", async () => {
    const sf = new SingleFlight<string, number>();
    let calls = 0;
    const failing = () => sf.do("k", async () => (calls++, await sleep(5), Promise.reject(new Error("render failed"))));
    const settled = await Promise.allSettled([failing(), failing(), failing()]);
    expect(settled.every((s) => s.status === "rejected")).toBe(true);
    expect(calls).toBe(1);
    expect(sf.has("k")).toBe(false);
    expect(await sf.do("k", async () => (calls++, 5))).toBe(5);
    expect(calls).toBe(2);
  });

  test("a synchronous throw becomes a rejection and is not kept", async () => {
    const sf = new SingleFlight<string, number>();
    await expect(
      sf.do("k", () => {
        throw new Error("sync");
      }),
    ).rejects.toThrow("sync");
    expect(sf.size).toBe(0);
  });
});

describe("WorkLimiter: bounded waits", () => {
  // On Bun's fake clock, so the deadline's boundary is exact: 1 ms short of it the task still
  // waits, at it the task has left the queue.
  beforeEach(() => jest.useFakeTimers());
  afterEach(() => jest.useRealTimers());

  test("a task that gets no slot within maxWaitMs leaves the queue without running; the others go on", async () => {
    const limiter = new WorkLimiter(1);
    let release!: () => void;
    const busy = limiter.run(() => new Promise<void>((r) => (release = r)));
    let ran = false;
    const waiting = outcome(
      limiter.run(() => {
        ran = true;
      }, 50),
    );
    const patient = limiter.run(() => "patient");
    expect(limiter.pending).toBe(2);
    jest.advanceTimersByTime(49);
    await flushMicrotasks();
    expect(waiting.settled).toBe(false);
    expect(limiter.pending).toBe(2);
    jest.advanceTimersByTime(1);
    await flushMicrotasks();
    expect(waiting.error).toBeInstanceOf(QueueWaitTimeoutError);
    expect(waiting.error?.message).toBe("等待图片处理超时（排队超过 50 毫秒）");
    expect(ran).toBe(false);
    expect(limiter.pending).toBe(1); // only the patient task is left
    release();
    await busy;
    expect(await patient).toBe("patient");
    expect(limiter.active).toBe(0);
  });

  test("a task that gets its slot in time runs normally, and its deadline never fires later", async () => {
    const limiter = new WorkLimiter(1);
    let release!: () => void;
    const busy = limiter.run(() => new Promise<void>((r) => (release = r)));
    let finish!: () => void;
    const inTime = outcome(limiter.run(() => new Promise<string>((r) => (finish = () => r("done"))), 300));
    await flushMicrotasks(); // the busy task has started
    jest.advanceTimersByTime(299);
    release(); // the slot comes free 1 ms before the deadline
    await busy;
    await flushMicrotasks();
    expect(limiter.active).toBe(1);
    expect(limiter.pending).toBe(0);
    jest.advanceTimersByTime(10_000); // runs far past its own queue deadline
    await flushMicrotasks();
    expect(inTime.settled).toBe(false);
    finish();
    await flushMicrotasks();
    expect(inTime.value).toBe("done");
    expect(limiter.active).toBe(0);
    expect(limiter.pending).toBe(0);
  });
});

/** A promise's outcome, readable synchronously once it has settled. */
function outcome<T>(promise: Promise<T>) {
  const state: { settled: boolean; value?: T; error?: Error } = { settled: false };
  promise.then(
    (value) => Object.assign(state, { settled: true, value }),
    (error: Error) => Object.assign(state, { settled: true, error }),
  );
  return state;
}

/** Lets every promise reaction that is already due run (no timers involved). */
async function flushMicrotasks(): Promise<void> {
  for (let i = 0; i < 10; i++) await Promise.resolve();
}
