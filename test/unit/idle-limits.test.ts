/**
 * An upload's idle deadline always fires before the connection's own idle limit (settings audit
 * M2): with the servers at 120 s, `upload_idle_timeout_seconds` 300 let Bun drop the silent
 * upload at ~118 s with no answer instead of the documented 408.
 */
import { expect, test } from "bun:test";
import { CONNECTION_IDLE_SECONDS, MAX_UPLOAD_IDLE_SECONDS, uploadIdleMs } from "../../src/http/idle-limits";

test("the upload deadline is the setting up to a few seconds under the connection's limit, which is Bun's maximum", () => {
  expect(CONNECTION_IDLE_SECONDS).toBe(255);
  expect(MAX_UPLOAD_IDLE_SECONDS).toBeLessThan(CONNECTION_IDLE_SECONDS);
  expect(uploadIdleMs(1)).toBe(1_000);
  expect(uploadIdleMs(60)).toBe(60_000);
  expect(uploadIdleMs(250)).toBe(250_000);
  for (const setting of [251, 300, 3_153_600_000]) expect(uploadIdleMs(setting)).toBe(MAX_UPLOAD_IDLE_SECONDS * 1000);
});
