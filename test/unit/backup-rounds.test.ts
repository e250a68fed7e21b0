/**
 * Snapshots never overlap (src/ops/backups.ts `takeSnapshot`), on the real application context
 * with its default local channel: requests that arrive while one runs share the next snapshot,
 * taken after it ends, and the in-progress marker stays until the last one is done.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { existsSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { AppContext } from "../../src/context";
import { markerPath } from "../../src/ops/backup-marker";
import { listSnapshots, SNAPSHOT_NAME, takeSnapshot } from "../../src/ops/backups";
import { openContext } from "../helpers/context";

const dir = mkdtempSync(join(tmpdir(), "kura-backup-rounds-"));
let app: AppContext;
let close: () => void;

beforeAll(async () => {
  ({ app, close } = await openContext(dir));
});

afterAll(() => {
  close();
  rmSync(dir, { recursive: true, force: true });
});

test("requests during a snapshot share the next one; no two run at once; the marker lasts until the last ends", async () => {
  const stagedSnapshots = () => readdirSync(app.paths.tmp).filter((f) => SNAPSHOT_NAME.test(f)).length;
  let mostAtOnce = 0;
  let markerGoneWhileRunning = false;
  let running = true;
  // Sampled while the workers copy the database (this thread is free meanwhile).
  const sampler = setInterval(() => {
    mostAtOnce = Math.max(mostAtOnce, stagedSnapshots());
    if (running && !existsSync(markerPath(dir))) markerGoneWhileRunning = true;
  }, 1);

  const first = takeSnapshot(app);
  const second = takeSnapshot(app);
  const third = takeSnapshot(app);
  const [a, b, c] = await Promise.all([first, second, third]);
  running = false;
  clearInterval(sampler);

  expect(a.channels).toEqual(["local"]);
  expect(b.name > a.name).toBe(true); // taken after the first ended
  expect(c).toEqual(b); // shared, not a third copy
  expect((await listSnapshots(app)).map((i) => i.name)).toEqual([b.name, a.name]);
  expect(mostAtOnce).toBeLessThanOrEqual(1);
  expect(markerGoneWhileRunning).toBe(false);
  expect(existsSync(markerPath(dir))).toBe(false);
  expect(stagedSnapshots()).toBe(0);

  // Once everything has ended, a new request takes a snapshot of its own at once.
  const later = await takeSnapshot(app);
  expect(later.name > b.name).toBe(true);
});

test("a failed snapshot does not block the one queued behind it", async () => {
  const local = app.channels.list()[0]!;
  local.healthy = false; // nothing writable: the first round fails
  const failing = takeSnapshot(app);
  const queued = takeSnapshot(app);
  local.healthy = true;
  await expect(failing).rejects.toThrow("没有健康的存储渠道");
  expect((await queued).channels).toEqual(["local"]);
});
