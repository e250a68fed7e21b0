/**
 * startLoop's rescheduling (settings audit L5): a change of the interval setting re-times the
 * wait from the end of the last round. It used to restart the whole wait, so a setting changed
 * more often than its interval (a script, a console slider) stopped the loop: no health checks
 * at all for as long as the changes went on.
 */
import { expect, test } from "bun:test";
import { startLoop } from "../../src/channels/health";
import type { AppContext } from "../../src/context";

const app = { log: { error: () => {}, warn: () => {}, info: () => {} } } as unknown as AppContext;

test("changes in a row, each before the interval is up, do not hold the rounds back", async () => {
  let rounds = 0;
  const loop = startLoop(
    "test",
    app,
    () => 300,
    async () => void rounds++,
    { runAtStart: false },
  );
  for (let i = 0; i < 10; i++) {
    await Bun.sleep(100);
    loop.reschedule();
  }
  await loop.stop();
  // ~300, ~600, ~900 ms; restarting the wait at each change gave none.
  expect(rounds).toBeGreaterThanOrEqual(2);
});

test("a shorter interval applies at once, counted from the last round; a longer one waits for it", async () => {
  let interval = 10_000;
  let rounds = 0;
  const loop = startLoop(
    "test",
    app,
    () => interval,
    async () => void rounds++,
    { runAtStart: false },
  );
  await Bun.sleep(150);
  interval = 100; // already 150 ms since the wait began: due now
  loop.reschedule();
  await Bun.sleep(50);
  expect(rounds).toBe(1);
  interval = 10_000;
  loop.reschedule();
  await Bun.sleep(300);
  expect(rounds).toBe(1);
  await loop.stop();
});

test("the first wait may be shorter than the interval (a slow loop resuming its schedule)", async () => {
  let rounds = 0;
  const loop = startLoop(
    "test",
    app,
    () => 60_000,
    async () => void rounds++,
    { runAtStart: false, firstDelayMs: 100 },
  );
  await Bun.sleep(250);
  expect(rounds).toBe(1);
  await loop.stop();
});

test("a clock set back since the last round never makes the wait longer than the interval", async () => {
  let clock = 1_000_000_000;
  let rounds = 0;
  const loop = startLoop(
    "test",
    app,
    () => 200,
    async () => void rounds++,
    { runAtStart: false, now: () => clock },
  );
  clock -= 3_600_000; // an hour back
  loop.reschedule();
  await Bun.sleep(400);
  expect(rounds).toBeGreaterThanOrEqual(1);
  await loop.stop();
});
