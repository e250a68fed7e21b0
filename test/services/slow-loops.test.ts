/**
 * Reconciliation and scheduled backups run a whole interval after their last round, wherever
 * the process restarted in between (crash audit L2): counted from each start, a server restarted
 * more often than daily never reconciled (crash leftovers stayed) or backed up on its own.
 */
import { expect, test } from "bun:test";
import type { AppContext } from "../../src/context";
import { recorded, remainingMs, SLOW_LOOP_START_DELAY_MS } from "../../src/loops";
import { serviceContextPerTest } from "./harness";

let app: AppContext;
serviceContextPerTest((ctx) => ({ app } = ctx));

const DAY = 86_400_000;
const HOUR = 3_600_000;

test("the first start ever waits a whole interval; later starts wait what is left of it since the last round", async () => {
  const t0 = 1_800_000_000_000;
  expect(remainingMs(app, "reconcile", DAY, t0)).toBe(DAY);
  // Restarted 6 h later, and again 20 h later, without a round in between: the round is due 24 h after t0.
  expect(remainingMs(app, "reconcile", DAY, t0 + 6 * HOUR)).toBe(18 * HOUR);
  expect(remainingMs(app, "reconcile", DAY, t0 + 20 * HOUR)).toBe(4 * HOUR);
  // Overdue (the process was down, or restarted just before the round): soon, but not during the start.
  expect(remainingMs(app, "reconcile", DAY, t0 + 3 * DAY)).toBe(SLOW_LOOP_START_DELAY_MS);
  // A clock set back never makes the wait longer than the interval.
  expect(remainingMs(app, "reconcile", DAY, t0 - 5 * DAY)).toBe(DAY);
  // Each loop keeps its own time.
  expect(remainingMs(app, "backup", 2 * HOUR, t0 + HOUR)).toBe(2 * HOUR);
});

test("a round writes its time down, failed or not, and the next start counts from it", async () => {
  const before = Date.now();
  remainingMs(app, "reconcile", DAY, before - 3 * DAY);
  await recorded(app, "reconcile", async () => {})();
  const afterOk = remainingMs(app, "reconcile", DAY);
  expect(afterOk).toBeGreaterThan(DAY - 60_000);
  await expect(
    recorded(app, "backup", async () => {
      throw new Error("测试：备份失败");
    })(),
  ).rejects.toThrow("测试：备份失败");
  expect(remainingMs(app, "backup", DAY)).toBeGreaterThan(DAY - 60_000);
});
