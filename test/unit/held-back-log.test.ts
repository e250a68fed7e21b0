/**
 * HeldBackLog (src/ops/held-back-log.ts), which keeps a broken channel's repeated failures (job
 * retries, read failovers) to one line a minute per subject and reason.
 */
import { expect, test } from "bun:test";
import { HELD_BACK_INTERVAL_MS, HeldBackLog } from "../../src/ops/held-back-log";

test("the first of each subject and reason, then one a minute with how many were held back", () => {
  let now = 1_000_000;
  const log = new HeldBackLog(() => now);
  expect(log.admit("usb", "读取失败")).toEqual({ log: true, heldBack: 0 });
  for (let i = 0; i < 5; i++) expect(log.admit("usb", "读取失败").log).toBe(false);
  // Another subject or another reason is news.
  expect(log.admit("nas", "读取失败")).toEqual({ log: true, heldBack: 0 });
  expect(log.admit("usb", "读取中断")).toEqual({ log: true, heldBack: 0 });
  now += HELD_BACK_INTERVAL_MS - 1;
  expect(log.admit("usb", "读取失败").log).toBe(false);
  now += 1;
  expect(log.admit("usb", "读取失败")).toEqual({ log: true, heldBack: 6 });
  expect(log.admit("usb", "读取失败").log).toBe(false);
});

test("memory stays bounded however many reasons come; a forgotten one is simply logged again", () => {
  const log = new HeldBackLog(() => 0);
  for (let i = 0; i < 10_000; i++) expect(log.admit("job", `原因 ${i}`).log).toBe(true);
  // The oldest were forgotten: logged again; a recent one is still held back.
  expect(log.admit("job", "原因 0").log).toBe(true);
  expect(log.admit("job", "原因 9999").log).toBe(false);
});
