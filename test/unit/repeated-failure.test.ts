// A background loop that fails every round (a disk gone read-only under a one-second loop) writes
// its ERROR once, again every ten minutes with the rounds it has cost, at once for a different
// failure, and an INFO when a round succeeds again.
import { expect, test } from "bun:test";
import { FailureLog, REPEAT_FAILURE_LOG_MS } from "../../src/ops/repeated-failure";

test("the same failure is logged once per period, a new one at once, the recovery once", () => {
  const lines: string[] = [];
  const line =
    (level: string) =>
    (msg: string, fields: Record<string, unknown> = {}) =>
      void lines.push(`${level} ${msg} ${JSON.stringify(fields)}`);
  let now = 1_000_000;
  const failures = new FailureLog({ error: line("ERROR"), info: line("INFO") }, "file-name-index", () => now);
  const disk = new Error("disk I/O error");

  failures.succeeded(); // nothing was failing: nothing to say
  for (let round = 0; round < 600; round++, now += 1_000) failures.failed(disk);
  expect(lines).toEqual([`ERROR 后台任务执行失败 {"loop":"file-name-index","err":"disk I/O error"}`]);

  now = 1_000_000 + REPEAT_FAILURE_LOG_MS - 1;
  failures.failed(disk);
  expect(lines.length).toBe(1);
  now += 1;
  failures.failed(new Error("disk I/O error")); // the same message, another error object
  expect(lines.at(-1)).toBe(`ERROR 后台任务仍在失败 {"loop":"file-name-index","err":"disk I/O error","failed_rounds":602}`);
  failures.failed(disk);
  expect(lines.length).toBe(2); // the period counts from the repeat

  failures.failed("database is locked"); // a different failure is news
  expect(lines.at(-1)).toBe(`ERROR 后台任务执行失败 {"loop":"file-name-index","err":"database is locked"}`);
  failures.failed("database is locked");
  failures.succeeded();
  failures.succeeded();
  expect(lines.slice(3)).toEqual([`INFO 后台任务恢复正常 {"loop":"file-name-index","failed_rounds":2}`]);

  failures.failed(disk); // after a recovery, the same failure is news again
  expect(lines.at(-1)).toBe(`ERROR 后台任务执行失败 {"loop":"file-name-index","err":"disk I/O error"}`);
});
