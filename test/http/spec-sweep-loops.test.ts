/**
 * Spec sweep, background work that runs on long timers (spec 6.2): the scheduled backup loop
 * honours `backup_interval_hours` (at least an hour, so its timer is taken over rather than
 * waited for), and a drain interrupted by its job's timeout or by shutdown opens no
 * `drain_failed`. Both run in-process over the real context and data directory of a server
 * that configured them through the HTTP API.
 */
import { expect, test } from "bun:test";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { DRAIN_JOB, deleteChannel, runDrain } from "../../src/channels/drain";
import { readMeta } from "../../src/db/meta";
import { JobInterruptedError } from "../../src/jobs/queue";
import { startBackgroundLoops } from "../../src/loops";
import { adminSession } from "../helpers/client";
import { openContext } from "../helpers/context";
import { KuraServer } from "../helpers/server";

const HOUR = 3_600_000;

/** Takes over timers of an hour or more (they are recorded, fired by the test); shorter ones run normally. */
function captureLongTimers() {
  const realSet = globalThis.setTimeout;
  const realClear = globalThis.clearTimeout;
  const timers: { ms: number; fn: () => void; cleared: boolean }[] = [];
  const handles = new Map<object, (typeof timers)[number]>();
  globalThis.setTimeout = ((fn: () => void, ms?: number, ...args: unknown[]) => {
    if ((ms ?? 0) < HOUR) return realSet(fn, ms, ...args);
    const timer = { ms: ms!, fn, cleared: false };
    const handle = {};
    timers.push(timer);
    handles.set(handle, timer);
    return handle;
  }) as typeof setTimeout;
  globalThis.clearTimeout = ((handle: unknown) => {
    const timer = handles.get(handle as object);
    if (timer) timer.cleared = true;
    else realClear(handle as ReturnType<typeof setTimeout>);
  }) as typeof clearTimeout;
  return {
    /**
     * Pending timers of this delay (neither cleared nor fired), up to 5 s less: a loop counts its
     * interval from the end of its last round, so a wait set a moment later is that much shorter.
     */
    live: (ms: number) => timers.filter((t) => t.ms <= ms && t.ms > ms - 5_000 && !t.cleared),
    /** Pending timers whose delay is between `min` and `max` ms. */
    between: (min: number, max: number) => timers.filter((t) => t.ms >= min && t.ms <= max && !t.cleared),
    fire(timer: (typeof timers)[number]) {
      timer.cleared = true;
      timer.fn();
    },
    restore() {
      globalThis.setTimeout = realSet;
      globalThis.clearTimeout = realClear;
    },
  };
}

async function until(ok: () => boolean, what: string, timeoutMs = 10_000) {
  const deadline = Date.now() + timeoutMs;
  while (!ok()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await Bun.sleep(20);
  }
}

/** A data directory prepared by a real server through its API, then stopped. */
async function preparedDataDir(config: Record<string, unknown>, channel?: { name: string; path: string }) {
  const server = await KuraServer.start();
  const admin = await adminSession(server);
  await admin.json("PUT", "/api/admin/config", config);
  const ch = channel
    ? await admin.json("POST", "/api/admin/channels", { name: channel.name, driver: "local", config: { path: channel.path } }, 201)
    : undefined;
  expect(await server.stop()).toBe(0);
  return { dataDir: server.dataDir, channelId: ch?.id as number | undefined };
}

test("the scheduled backup loop waits backup_interval_hours between rounds and follows a change at once", async () => {
  const testStarted = Date.now();
  const { dataDir } = await preparedDataDir({ backup_interval_hours: 2 });
  const ctx = await openContext(dataDir);
  const timers = captureLongTimers();
  let loops: ReturnType<typeof startBackgroundLoops> = [];
  try {
    const snapshots = () => {
      const dir = join(dataDir, "storage/_kura/backups");
      return existsSync(dir) ? readdirSync(dir).filter((f) => f.endsWith(".db")) : [];
    };
    // The installation's first start (the server that prepared the data dir) counted as a round:
    // the first wait is what is left of the interval since then, less however long that server
    // took to start, be configured and stop (seconds on a loaded machine), so it is computed from
    // the recorded time rather than expected within a few seconds of the whole interval.
    const firstStart = Number(readMeta(ctx.app.db, "loop_last_round:backup"));
    expect(firstStart).toBeGreaterThan(testStarted);
    const before = Date.now();
    loops = startBackgroundLoops(ctx.app);
    const after = Date.now();
    // Not at start: the first round waits the rest of a whole interval.
    const firstWait = timers.between(firstStart + 2 * HOUR - after, firstStart + 2 * HOUR - before);
    expect(firstWait.length).toBe(1);
    expect(snapshots()).toEqual([]);

    const first = firstWait[0]!;
    timers.fire(first);
    await until(() => snapshots().length === 1, "the first scheduled snapshot");
    // The next round is scheduled the same interval later.
    await until(() => timers.live(2 * HOUR).length === 1, "the next round");
    expect(timers.live(2 * HOUR)[0]).not.toBe(first);
    expect(ctx.logs.some((l) => l.msg === "元数据快照已写入存储渠道" && l.fields.channel === "local")).toBe(true);

    // A new interval replaces the pending wait at once (counted from the round that just ended).
    ctx.app.settings.update({ backup_interval_hours: 5 });
    expect(timers.live(2 * HOUR)).toEqual([]);
    expect(timers.live(5 * HOUR).length).toBe(1);
    expect(snapshots().length).toBe(1);
  } finally {
    await Promise.all(loops.map((l) => l.stop()));
    timers.restore();
    ctx.close();
    rmSync(dataDir, { recursive: true, force: true });
  }
});

test("a drain interrupted by its job timeout or by shutdown opens no drain_failed; a real delete failure does", async () => {
  const channelDir = mkdtempSync(join(tmpdir(), "kura-sweep-drain-"));
  const { dataDir, channelId } = await preparedDataDir({}, { name: "draining", path: channelDir });
  // A system object of ours on the channel: the drain must delete it.
  mkdirSync(join(channelDir, "_kura/backups"), { recursive: true });
  writeFileSync(join(channelDir, "_kura/backups/kura-20200101-000000.000.db"), "old snapshot");
  const ctx = await openContext(dataDir);
  const { app } = ctx;
  const drainAlerts = () => app.db.query<{ resolved_at: string }, []>("SELECT resolved_at FROM alerts WHERE kind = 'drain_failed'").all();
  try {
    expect(deleteChannel(app, { id: "default", name: "admin" }, channelId, true)).toBe(202);
    const driver = app.channels.get(channelId!)!.driver!;
    const realDelete = driver.delete.bind(driver);
    const ctxFor = (abort: AbortController) => ({ id: 1, kind: DRAIN_JOB, attempt: 1, maxAttempts: 10, signal: abort.signal, heartbeat: () => true });

    // The job's own timeout fires while a delete is under way; the delete then fails.
    for (const reason of ["timeout", "shutdown"] as const) {
      const abort = new AbortController();
      driver.delete = async () => {
        abort.abort(new JobInterruptedError(reason));
        throw new Error("连接已中断");
      };
      await expect(runDrain(app, { channel_id: channelId! }, ctxFor(abort))).rejects.toBeInstanceOf(JobInterruptedError);
      expect(drainAlerts()).toEqual([]);
    }

    // Shutdown through the real queue: stop() reaches its deadline while a delete hangs.
    let deleting = false;
    driver.delete = async () => {
      deleting = true;
      await Bun.sleep(500);
      throw new Error("连接已中断");
    };
    app.jobs.start();
    await until(() => deleting, "the drain job to start deleting");
    expect((await app.jobs.stop({ deadlineMs: 50 })).abandoned).toBe(1);
    await Bun.sleep(700); // the hanging delete fails after the abort
    await until(() => app.db.query("SELECT 1 FROM jobs WHERE kind = ? AND state = 'available'").get(DRAIN_JOB) !== null, "the drain job released");
    expect(drainAlerts()).toEqual([]);

    // Control: the same failure without an interruption is a drain failure.
    driver.delete = async () => {
      throw new Error("权限不足");
    };
    await expect(runDrain(app, { channel_id: channelId! }, ctxFor(new AbortController()))).rejects.toThrow();
    expect(drainAlerts()).toEqual([{ resolved_at: "" }]);
    driver.delete = realDelete;
  } finally {
    ctx.close();
    rmSync(dataDir, { recursive: true, force: true });
    rmSync(channelDir, { recursive: true, force: true });
  }
});
