/**
 * The SFTP reply watchdog (src/channels/drivers/sftp/watchdog.ts): a channel with requests
 * outstanding must answer something every `ms`; a slow but moving pipeline is never failed.
 *
 * On Bun's fake clock (`jest.useFakeTimers` drives both `setTimeout` and `performance.now`), so
 * every boundary is exact: a silence of `ms − 1` passes, one of `ms` fails, whatever the load on
 * the machine running the tests.
 */
import { afterEach, beforeEach, describe, expect, jest, test } from "bun:test";
import { ReplyWatchdog, SftpRequestTimeoutError } from "../../src/channels/drivers/sftp/watchdog";

const MS = 400;
const TIMED_OUT = `SFTP 服务器 ${MS / 1000} 秒未响应`;

beforeEach(() => jest.useFakeTimers());
afterEach(() => jest.useRealTimers());

const advance = (ms: number) => jest.advanceTimersByTime(ms);

/** A request tracked by `dog`: its outcome ("answered", or the error's message) once settled. */
function request(dog: ReplyWatchdog) {
  let outcome: string | undefined;
  const answered = dog.track((err) => {
    outcome ??= err instanceof SftpRequestTimeoutError ? err.message : `other: ${err.message}`;
  });
  return {
    answer() {
      answered();
      outcome ??= "answered";
    },
    get outcome() {
      return outcome;
    },
  };
}

function watchdog(ms = MS) {
  const hangs = { count: 0 };
  const dog = new ReplyWatchdog(ms, () => hangs.count++);
  return { dog, hangs };
}

describe("ReplyWatchdog", () => {
  test("silence with requests outstanding fails every one of them once, exactly at the deadline, then reports the hang once", () => {
    const { dog, hangs } = watchdog();
    const requests = [request(dog), request(dog), request(dog)];
    advance(MS - 1);
    expect(requests.map((r) => r.outcome)).toEqual([undefined, undefined, undefined]);
    advance(1);
    expect(requests.map((r) => r.outcome)).toEqual(Array(3).fill(TIMED_OUT));
    expect(hangs.count).toBe(1);
    advance(MS * 5);
    expect(hangs.count).toBe(1);
  });

  test("silence after some replies is noticed too, one whole deadline after the last reply", () => {
    const { dog, hangs } = watchdog();
    const answered = request(dog);
    const unanswered = request(dog);
    advance(MS / 2);
    answered.answer(); // the deadline moves to 1.5 × MS
    advance(MS - 1);
    expect(unanswered.outcome).toBeUndefined();
    expect(hangs.count).toBe(0);
    advance(1);
    expect(answered.outcome).toBe("answered");
    expect(unanswered.outcome).toBe(TIMED_OUT);
    expect(hangs.count).toBe(1);
  });

  test("a request after a short pause gets a whole deadline of its own, not what was left of the last one", () => {
    const { dog, hangs } = watchdog();
    const first = request(dog);
    advance(MS * 0.1);
    first.answer();
    advance(MS * 0.8); // idle; the next request comes shortly before the first one's deadline would have passed
    const next = request(dog);
    advance(MS - 1); // well past the first one's deadline, 1 ms short of its own
    expect(next.outcome).toBeUndefined();
    next.answer();
    expect(next.outcome).toBe("answered");
    advance(MS * 5);
    expect(hangs.count).toBe(0);
  });

  test("the same late request with no reply fails exactly one deadline after it was sent", () => {
    const { dog, hangs } = watchdog();
    const first = request(dog);
    advance(MS * 0.1);
    first.answer();
    advance(MS * 0.8);
    const next = request(dog);
    advance(MS - 1);
    expect(next.outcome).toBeUndefined();
    advance(1);
    expect(next.outcome).toBe(TIMED_OUT);
    expect(hangs.count).toBe(1);
  });

  test("a slow pipeline that keeps answering is never failed, although each request waits longer than the deadline", () => {
    const { dog, hangs } = watchdog();
    // Eight requests in flight; one answer every MS − 1, so the last waits ~8 × MS in all.
    const requests = Array.from({ length: 8 }, () => request(dog));
    for (const r of requests) {
      advance(MS - 1);
      expect(r.outcome).toBeUndefined();
      r.answer();
    }
    expect(requests.map((r) => r.outcome)).toEqual(Array(8).fill("answered"));
    advance(MS * 5);
    expect(hangs.count).toBe(0);
  });

  test("an idle channel is not silent: the clock starts with the first request after the pause", () => {
    const { dog, hangs } = watchdog();
    const first = request(dog);
    first.answer();
    advance(MS * 3); // idle, nothing outstanding
    const next = request(dog);
    advance(MS - 1);
    next.answer();
    expect(next.outcome).toBe("answered");
    advance(MS * 5);
    expect(hangs.count).toBe(0);
  });

  test("after a hang the watchdog works for the next requests as before", () => {
    const { dog, hangs } = watchdog();
    request(dog);
    advance(MS);
    expect(hangs.count).toBe(1);
    const again = request(dog);
    advance(MS - 1);
    expect(again.outcome).toBeUndefined();
    advance(1);
    expect(again.outcome).toBe(TIMED_OUT);
    expect(hangs.count).toBe(2);
  });

  test("requests failed by a hang are forgotten: a later request answered in time leaves the watchdog quiet", () => {
    const { dog, hangs } = watchdog();
    request(dog); // never answered: failed by the hang, and its reply never comes
    advance(MS);
    expect(hangs.count).toBe(1);
    const next = request(dog);
    advance(MS / 4);
    next.answer();
    advance(MS * 5);
    expect(next.outcome).toBe("answered");
    expect(hangs.count).toBe(1);
  });
});
