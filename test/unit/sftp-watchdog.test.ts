/**
 * The SFTP reply watchdog (src/channels/drivers/sftp/watchdog.ts): a channel with requests
 * outstanding must answer something every `ms`; a slow but moving pipeline is never failed.
 */
import { describe, expect, test } from "bun:test";
import { ReplyWatchdog, SftpRequestTimeoutError } from "../../src/channels/drivers/sftp/watchdog";

/** Long enough that timer jitter on a loaded CI machine (tens of ms) cannot fake a silence. */
const MS = 400;

/** A request tracked by `dog`: its outcome ("answered", or the error's message) once settled. */
function request(dog: ReplyWatchdog) {
  let outcome: string | undefined;
  let answered!: () => void;
  const settled = new Promise<void>((resolve) => {
    answered = dog.track((err) => {
      outcome ??= err instanceof SftpRequestTimeoutError ? err.message : `other: ${err.message}`;
      resolve();
    });
  });
  return {
    answer() {
      answered();
      outcome ??= "answered";
    },
    get outcome() {
      return outcome;
    },
    settled,
  };
}

describe("ReplyWatchdog", () => {
  test("silence with requests outstanding fails every one of them once, then reports the hang once", async () => {
    let hung = 0;
    const dog = new ReplyWatchdog(MS, () => hung++);
    const started = performance.now();
    const requests = [request(dog), request(dog), request(dog)];
    await Promise.all(requests.map((r) => r.settled));
    const waited = performance.now() - started;
    expect(requests.map((r) => r.outcome)).toEqual(Array(3).fill(`SFTP 服务器 ${MS / 1000} 秒未响应`));
    expect(waited).toBeGreaterThanOrEqual(MS - 5);
    expect(waited).toBeLessThan(MS + 500);
    await Bun.sleep(MS * 2);
    expect(hung).toBe(1);
  });

  test("silence after some replies is noticed too, one whole deadline after the last reply", async () => {
    let hung = 0;
    const dog = new ReplyWatchdog(MS, () => hung++);
    const started = performance.now();
    const answered = request(dog);
    const unanswered = request(dog);
    await Bun.sleep(MS * 0.5);
    answered.answer(); // the deadline moves to 1.5 × MS
    await unanswered.settled;
    const waited = performance.now() - started;
    expect(answered.outcome).toBe("answered");
    expect(unanswered.outcome).toBe(`SFTP 服务器 ${MS / 1000} 秒未响应`);
    expect(waited).toBeGreaterThanOrEqual(MS * 1.5 - 5);
    expect(waited).toBeLessThan(MS * 1.5 + 500);
    expect(hung).toBe(1);
  });

  test("a request after a short pause gets a whole deadline of its own, not what was left of the last one", async () => {
    let hung = 0;
    const long = 1_000; // wider margins: the difference is between 1.1 s and 1.9 s
    const dog = new ReplyWatchdog(long, () => hung++);
    const first = request(dog);
    await Bun.sleep(long * 0.1);
    first.answer();
    await Bun.sleep(long * 0.8); // idle; the next request comes shortly before the first one's deadline would have passed
    const next = request(dog);
    await Bun.sleep(long * 0.6); // answered well within its own deadline, but past the first one's
    next.answer();
    expect(next.outcome).toBe("answered");
    expect(hung).toBe(0);
  });

  test("a slow pipeline that keeps answering is never failed, although each request waits longer than the deadline", async () => {
    let hung = 0;
    const dog = new ReplyWatchdog(MS, () => hung++);
    // Eight requests in flight; one answer every 0.3 × MS, so the last waits ~2.4 × MS in all.
    const requests = Array.from({ length: 8 }, () => request(dog));
    for (const r of requests) {
      await Bun.sleep(MS * 0.3);
      r.answer();
    }
    expect(requests.map((r) => r.outcome)).toEqual(Array(8).fill("answered"));
    await Bun.sleep(MS * 2);
    expect(hung).toBe(0);
  });

  test("an idle channel is not silent: the clock starts with the first request after the pause", async () => {
    let hung = 0;
    const dog = new ReplyWatchdog(MS, () => hung++);
    const first = request(dog);
    first.answer();
    await Bun.sleep(MS * 3); // idle, nothing outstanding
    const next = request(dog);
    await Bun.sleep(MS * 0.25);
    next.answer();
    expect(next.outcome).toBe("answered");
    expect(hung).toBe(0);
  });
});
