// The durable job queue against a real SQLite file; time is a fake clock so
// backoff and leases are exercised without sleeping.
import { afterEach, beforeEach, describe, expect, test } from "bun:test";
import type { Database } from "bun:sqlite";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { openDatabase } from "../../src/db/open";
import { backoffDelay } from "../../src/jobs/backoff";
import { JobQueue, PermanentJobError, type QueueOptions } from "../../src/jobs/queue";

const ROOT = join(import.meta.dir, "../..");
const MIGRATION = readFileSync(join(ROOT, "migrations/0002_jobs.sql"), "utf8");
const T0 = 1_700_000_000_000;

let dir: string;
let dbPath: string;
let clock: number;
let logs: Array<{ level: string; msg: string; fields?: Record<string, unknown> }>;
const opened: Database[] = [];
const queues: JobQueue[] = [];

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), "kura-jobs-"));
  dbPath = join(dir, "kura.db");
  clock = T0;
  logs = [];
  openDb().exec(MIGRATION);
});

afterEach(async () => {
  for (const q of queues.splice(0)) await q.stop({ deadlineMs: 20 });
  for (const db of opened.splice(0)) db.close();
  rmSync(dir, { recursive: true, force: true });
});

function openDb(): Database {
  const db = openDatabase(dbPath);
  opened.push(db);
  return db;
}

function queue(db: Database = opened[0]!, opts: QueueOptions = {}): JobQueue {
  const q = new JobQueue(db, {
    now: () => clock,
    random: () => 0.5,
    log: (level, msg, fields) => logs.push({ level, msg, fields }),
    ...opts,
  });
  queues.push(q);
  return q;
}

async function until(cond: () => boolean, ms = 3000): Promise<void> {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error("condition not reached in time");
    await Bun.sleep(5);
  }
}

function gate(): { wait: Promise<void>; open: () => void } {
  let open!: () => void;
  const wait = new Promise<void>((r) => (open = r));
  return { wait, open };
}

const jobCount = (db: Database) => db.query<{ n: number }, []>("SELECT COUNT(*) AS n FROM jobs").get()!.n;

test("enqueue commits or rolls back with the caller's transaction", () => {
  const db = opened[0]!;
  db.exec("CREATE TABLE things (id INTEGER PRIMARY KEY)");
  const q = queue(db);
  const failing = db.transaction(() => {
    db.run("INSERT INTO things (id) VALUES (1)");
    db.transaction(() => q.enqueue("replicate", { blob: 1 }))(); // nested: a savepoint
    throw new Error("boom");
  });
  expect(() => failing()).toThrow("boom");
  expect(jobCount(db)).toBe(0);
  expect(db.query("SELECT * FROM things").all()).toHaveLength(0);

  const id = db.transaction(() => {
    db.run("INSERT INTO things (id) VALUES (2)");
    return q.enqueue("replicate", { blob: 2 });
  })();
  const row = q.get(id)!;
  expect(row.state).toBe("available");
  expect(JSON.parse(row.payload)).toEqual({ blob: 2 });
  expect(row.run_at).toBe(T0);
});

test("a successful handler completes the job", async () => {
  const q = queue();
  const seen: unknown[] = [];
  q.register("purge", (payload, ctx) => void seen.push(payload, ctx.attempt, ctx.id));
  const id = q.enqueue("purge", { urls: ["https://cdn/x"] });
  expect(await q.processDue()).toBe(1);
  expect(seen).toEqual([{ urls: ["https://cdn/x"] }, 1, id]);
  const row = q.get(id)!;
  expect(row).toMatchObject({ state: "completed", attempts: 1, finished_at: T0, locked_until: null });
  expect(await q.processDue()).toBe(0);
});

test("a future runAt is scheduled and runs once due", async () => {
  const q = queue();
  let runs = 0;
  q.register("delete", () => void runs++);
  const id = q.enqueue("delete", {}, { delayMs: 60_000 });
  expect(q.get(id)!.state).toBe("scheduled");
  expect(await q.processDue()).toBe(0);
  clock += 59_999;
  expect(await q.processDue()).toBe(0);
  clock += 1;
  expect(await q.processDue()).toBe(1);
  expect(runs).toBe(1);
  expect(q.get(id)!.state).toBe("completed");
});

test("backoff grows exponentially, is capped and jittered into [d/2, d]", () => {
  const opts = { baseMs: 1000, capMs: 5000 };
  expect(backoffDelay(1, opts, () => 0)).toBe(500);
  expect(backoffDelay(1, opts, () => 1)).toBe(1000);
  expect(backoffDelay(3, opts, () => 1)).toBe(4000);
  expect(backoffDelay(4, opts, () => 1)).toBe(5000);
  expect(backoffDelay(4000, opts, () => 0)).toBe(2500);
});

test("a failure becomes retryable after backoff, then succeeds", async () => {
  const q = queue(undefined, { backoff: { baseMs: 1000, capMs: 60_000 } });
  let calls = 0;
  q.register("replicate", () => {
    if (++calls <= 2) throw new Error(`通道不可用 ${calls}`);
  });
  const id = q.enqueue("replicate", { blob: 7 });

  expect(await q.processDue()).toBe(1);
  expect(q.get(id)).toMatchObject({ state: "retryable", attempts: 1, last_error: "通道不可用 1", run_at: T0 + 750 });
  expect(await q.processDue()).toBe(0); // not due yet
  clock += 749;
  expect(await q.processDue()).toBe(0);
  clock += 1;
  expect(await q.processDue()).toBe(1);
  expect(q.get(id)).toMatchObject({ state: "retryable", attempts: 2, run_at: clock + 1500 });
  clock += 1500;
  expect(await q.processDue()).toBe(1);
  expect(q.get(id)).toMatchObject({ state: "completed", attempts: 3, finished_at: clock });
  expect(logs.filter((l) => l.level === "warn")).toHaveLength(2);
});

test("reaching max attempts discards the job", async () => {
  const q = queue();
  let calls = 0;
  q.register(
    "drain",
    () => {
      calls++;
      throw new Error("磁盘已满");
    },
    { maxAttempts: 2 },
  );
  const id = q.enqueue("drain", {});
  await q.processDue();
  clock += 3_600_000;
  await q.processDue();
  expect(q.get(id)).toMatchObject({ state: "discarded", attempts: 2, last_error: "磁盘已满", finished_at: clock });
  clock += 3_600_000;
  expect(await q.processDue()).toBe(0);
  expect(calls).toBe(2);
});

test("PermanentJobError discards at once", async () => {
  const q = queue();
  q.register(
    "purge",
    () => {
      throw new PermanentJobError("图片不存在");
    },
    { maxAttempts: 5 },
  );
  const id = q.enqueue("purge", {});
  await q.processDue();
  expect(q.get(id)).toMatchObject({ state: "discarded", attempts: 1, last_error: "图片不存在" });
});

test("timeoutMs aborts ctx.signal and the run counts as a failure", async () => {
  const q = queue();
  q.register(
    "slow",
    async (_p, ctx) => {
      await new Promise((r) => ctx.signal.addEventListener("abort", r));
      throw ctx.signal.reason;
    },
    { timeoutMs: 20 },
  );
  const id = q.enqueue("slow", {});
  await q.processDue();
  expect(q.get(id)).toMatchObject({ state: "retryable", attempts: 1, last_error: "任务执行超时" });
});

describe("leases", () => {
  test("an expired lease lets another instance re-run the job; the stale run is fenced off", async () => {
    const a = queue(openDb(), { leaseMs: 1000 });
    const b = queue(openDb(), { leaseMs: 1000 });
    const holdA = gate();
    const holdB = gate();
    let ctxA: { heartbeat(ms?: number): boolean } | null = null;
    let heartbeatAfterSteal = null as boolean | null;
    a.register("replicate", async (_p, ctx) => {
      ctxA = ctx;
      await holdA.wait;
      heartbeatAfterSteal = ctx.heartbeat();
    });
    const bAttempts: number[] = [];
    b.register("replicate", async (_p, ctx) => {
      bAttempts.push(ctx.attempt);
      await holdB.wait;
    });
    const id = a.enqueue("replicate", { blob: 1 });

    const runA = a.processDue(); // A claims the job and stalls like a hung or dead worker
    await until(() => ctxA !== null);
    expect(a.get(id)).toMatchObject({ state: "running", locked_until: T0 + 1000 });
    clock += 800;
    expect(ctxA!.heartbeat()).toBe(true); // extends to T0 + 1800
    clock += 700;
    expect(await b.processDue()).toBe(0); // would have expired at T0 + 1000 without the heartbeat
    clock += 300;
    const runB = b.processDue();
    await until(() => bAttempts.length === 1);
    expect(bAttempts).toEqual([2]);

    holdA.open(); // A wakes up while B owns the job: neither its heartbeat nor its success counts
    await runA;
    expect(heartbeatAfterSteal).toBe(false);
    expect(a.get(id)).toMatchObject({ state: "running", attempts: 2, locked_until: T0 + 2800 });
    expect(logs.some((l) => l.msg.includes("租约已失效"))).toBe(true);

    clock += 100;
    holdB.open();
    await runB;
    expect(b.get(id)).toMatchObject({ state: "completed", attempts: 2, finished_at: T0 + 1900 });
  });

  test("a job still running in this process is not claimed again when its lease lapses", async () => {
    const q = queue(undefined, { leaseMs: 1000 });
    const hold = gate();
    let runs = 0;
    q.register(
      "replicate",
      async () => {
        runs++;
        await hold.wait;
      },
      { concurrency: 2 },
    );
    const id = q.enqueue("replicate", {});
    const first = q.processDue();
    clock += 5000;
    expect(await q.processDue()).toBe(0);
    hold.open();
    await first;
    expect(runs).toBe(1);
    expect(q.get(id)).toMatchObject({ state: "completed", attempts: 1 });
  });

  test("a lapsed lease on the last allowed attempt discards the job", async () => {
    const db = opened[0]!;
    const q = queue(db);
    let runs = 0;
    q.register("replicate", () => void runs++);
    const id = q.enqueue("replicate", {}, { maxAttempts: 1 });
    db.run("UPDATE jobs SET state = 'running', attempts = 1, locked_until = ? WHERE id = ?", [T0 - 1, id]);
    expect(await q.processDue()).toBe(0);
    expect(runs).toBe(0);
    expect(q.get(id)).toMatchObject({ state: "discarded", attempts: 1 });
  });

  test("a worker process killed mid-handler: a new queue finishes the job after the lease", async () => {
    const child = join(dir, "worker.ts");
    writeFileSync(
      child,
      `import { openDatabase } from ${JSON.stringify(join(ROOT, "src/db/open.ts"))};
       import { JobQueue } from ${JSON.stringify(join(ROOT, "src/jobs/queue.ts"))};
       const q = new JobQueue(openDatabase(process.argv[2]), { pollMs: 20, leaseMs: 30_000 });
       q.register("replicate", async (payload, ctx) => {
         console.log("STARTED " + ctx.id + " " + JSON.stringify(payload));
         await new Promise(() => {}); // killed before this ever finishes
       });
       q.start();`,
    );
    const db = opened[0]!;
    const realClock = queue(db, { now: Date.now });
    const id = realClock.enqueue("replicate", { blob: 42, channel: "s3" });

    const proc = Bun.spawn(["bun", child, dbPath], { stdout: "pipe", stderr: "inherit" });
    const reader = proc.stdout.getReader();
    let out = "";
    while (!out.includes("STARTED")) {
      const { value, done } = await reader.read();
      if (done) throw new Error(`worker exited early: ${out}`);
      out += new TextDecoder().decode(value);
    }
    expect(out).toContain(`STARTED ${id} {"blob":42,"channel":"s3"}`);
    proc.kill("SIGKILL");
    await proc.exited;
    expect(proc.signalCode).toBe("SIGKILL");

    const stuck = realClock.get(id)!;
    expect(stuck).toMatchObject({ state: "running", attempts: 1 });
    const seen: unknown[] = [];
    realClock.register("replicate", (payload, ctx) => void seen.push(payload, ctx.attempt));
    expect(await realClock.processDue()).toBe(0); // lease still held by the dead worker

    const later = queue(openDb(), { now: () => stuck.locked_until! + 1 });
    later.register("replicate", (payload, ctx) => void seen.push(payload, ctx.attempt));
    expect(await later.processDue()).toBe(1);
    expect(seen).toEqual([{ blob: 42, channel: "s3" }, 2]);
    expect(later.get(id)).toMatchObject({ state: "completed", attempts: 2 });
  });
});

test("per-kind concurrency is honoured and kinds do not block each other", async () => {
  const q = queue(undefined, { pollMs: 10 });
  const hold = gate();
  let now = 0;
  let max = 0;
  let otherDone = false;
  q.register(
    "replicate",
    async () => {
      max = Math.max(max, ++now);
      await hold.wait;
      now--;
    },
    { concurrency: 2 },
  );
  q.register("purge", () => void (otherDone = true));
  for (let i = 0; i < 5; i++) q.enqueue("replicate", { i });
  q.enqueue("purge", {});
  q.start();
  await until(() => now === 2 && otherDone);
  await Bun.sleep(50); // several poll intervals: still no third one
  expect(now).toBe(2);
  expect(q.counts()).toEqual({ waiting: 3, running: 2 });
  hold.open();
  await until(() => q.counts().waiting + q.counts().running === 0);
  expect(max).toBe(2);
  const done = opened[0]!.query("SELECT COUNT(*) AS n FROM jobs WHERE state = 'completed'").get() as { n: number };
  expect(done.n).toBe(6);
});

describe("start, wake and stop", () => {
  test("enqueue wakes a started queue instead of waiting for the poll interval; wake() does too", async () => {
    const q = queue(undefined, { pollMs: 60_000 });
    const ran: number[] = [];
    q.register("purge", (p: { n: number }) => void ran.push(p.n));
    q.start();
    await Bun.sleep(10); // the first poll finds nothing
    q.enqueue("purge", { n: 1 });
    await until(() => ran.length === 1, 1000);
    // Job 1's end wakes q once more (a slot is free); that poll is a due 0 ms timer, so it runs before
    // this sleep ends even on a loaded machine, and cannot claim the job enqueued below.
    await Bun.sleep(20);

    const other = queue(openDb()); // another connection enqueues: no wake reaches q
    other.enqueue("purge", { n: 2 });
    await Bun.sleep(50);
    expect(ran).toEqual([1]);
    q.wake();
    await until(() => ran.length === 2, 1000);
    expect(ran).toEqual([1, 2]);
  });

  test("the poller never claims inside a transaction left open on the same connection", async () => {
    const db = opened[0]!;
    const q = queue(db, { pollMs: 10 });
    let runs = 0;
    q.register("purge", () => void runs++);
    q.start();
    db.run("BEGIN");
    q.enqueue("purge", {});
    await Bun.sleep(60);
    expect(runs).toBe(0);
    db.run("ROLLBACK");
    await Bun.sleep(30);
    expect(runs).toBe(0);
    expect(jobCount(db)).toBe(0);
  });

  test("stop() waits for the running job and stops polling", async () => {
    const q = queue(undefined, { pollMs: 10 });
    let started = false;
    let finished = false;
    q.register("drain", async () => {
      started = true;
      await Bun.sleep(150);
      finished = true;
    });
    const id = q.enqueue("drain", {});
    q.start();
    await until(() => started);
    let stopped = false;
    const stopping = q.stop().then(() => (stopped = true));
    await Bun.sleep(50);
    expect(stopped).toBe(false);
    await stopping;
    expect(finished).toBe(true);
    expect(q.get(id)!.state).toBe("completed");

    const next = q.enqueue("drain", {});
    await Bun.sleep(50);
    expect(q.get(next)!.state).toBe("available");
  });

  test("stop() with a deadline leaves stubborn jobs to the lease and hands back interrupted ones", async () => {
    const q = queue(undefined, { pollMs: 10, leaseMs: 30_000 });
    let running = 0;
    q.register("stubborn", async () => {
      running++;
      await new Promise(() => {});
    });
    q.register("polite", async (_p, ctx) => {
      running++;
      await new Promise((r) => ctx.signal.addEventListener("abort", r));
      throw ctx.signal.reason;
    });
    const stubborn = q.enqueue("stubborn", {});
    const polite = q.enqueue("polite", {});
    q.start();
    await until(() => running === 2);
    expect(await q.stop({ deadlineMs: 30 })).toEqual({ abandoned: 2 });
    await Bun.sleep(10);
    expect(q.get(stubborn)).toMatchObject({ state: "running", attempts: 1, locked_until: T0 + 30_000 });
    expect(q.get(polite)).toMatchObject({ state: "available", attempts: 0 });
  });
});

test("uniqueKey dedups unfinished jobs of the same kind only", async () => {
  const q = queue();
  let fail = true;
  q.register(
    "replicate",
    () => {
      if (fail) throw new Error("暂时失败");
    },
    { concurrency: 5 },
  );
  const id = q.enqueue("replicate", { blob: 1 }, { uniqueKey: "1:s3" });
  expect(q.enqueue("replicate", { blob: 1 }, { uniqueKey: "1:s3" })).toBe(id);
  expect(q.enqueue("replicate", { blob: 1 }, { uniqueKey: "1:webdav" })).not.toBe(id);
  expect(q.enqueue("purge", {}, { uniqueKey: "1:s3" })).not.toBe(id);

  await q.processDue();
  expect(q.get(id)!.state).toBe("retryable");
  expect(q.enqueue("replicate", { blob: 1 }, { uniqueKey: "1:s3" })).toBe(id);

  fail = false;
  clock += 3_600_000;
  await q.processDue();
  expect(q.get(id)!.state).toBe("completed");
  const again = q.enqueue("replicate", { blob: 1 }, { uniqueKey: "1:s3" });
  expect(again).not.toBe(id);
  expect(jobCount(opened[0]!)).toBe(4);
});

test("counts() reports waiting and running, and throws when the database fails", async () => {
  const db = opened[0]!;
  const q = queue(db);
  const hold = gate();
  q.register("block", () => hold.wait);
  q.register("fail", () => {
    throw new Error("x");
  });
  q.register("ok", () => {});
  q.enqueue("ok", {});
  const failing = q.enqueue("fail", {});
  q.enqueue("block", {});
  const run = q.processDue(); // ok → completed, fail → retryable, block → running
  await until(() => q.counts().running === 1 && q.get(failing)!.state === "retryable");
  q.enqueue("ok", {}); // available
  q.enqueue("ok", {}, { delayMs: 1000 }); // scheduled
  expect(q.counts()).toEqual({ waiting: 3, running: 1 });
  hold.open();
  await run;
  expect(q.counts()).toEqual({ waiting: 3, running: 0 });
  db.exec("DROP TABLE jobs");
  expect(() => q.counts()).toThrow();
});

test("finished jobs are pruned after their retention", async () => {
  const q = queue(undefined, { completedRetentionMs: 1000, discardedRetentionMs: 5000 });
  q.register("ok", () => {});
  q.register("bad", () => {
    throw new PermanentJobError("无效");
  });
  const ok = q.enqueue("ok", {});
  const bad = q.enqueue("bad", {});
  const pending = q.enqueue("ok", {}, { delayMs: 10_000 });
  await q.processDue();
  clock += 1000;
  expect(q.prune()).toBe(0);
  clock += 1;
  expect(q.prune()).toBe(1);
  expect(q.get(ok)).toBeNull();
  expect(q.get(bad)!.state).toBe("discarded");
  clock += 4000;
  expect(q.prune()).toBe(1);
  expect(q.get(bad)).toBeNull();
  expect(q.get(pending)!.state).toBe("scheduled");
});

test("expedite makes a backing-off job with the same uniqueKey due at once", async () => {
  const q = queue(opened[0]!, { backoff: { baseMs: 60_000, capMs: 3_600_000 } });
  let calls = 0;
  q.register("flaky", () => {
    calls++;
    if (calls === 1) throw new Error("first try fails");
  });
  const id = q.enqueue("flaky", {}, { uniqueKey: "k" });
  await q.processDue();
  expect(q.get(id)!.state).toBe("retryable");
  expect(q.get(id)!.run_at).toBeGreaterThan(clock);
  // Without expedite the same key is a no-op and nothing runs yet.
  expect(q.enqueue("flaky", {}, { uniqueKey: "k" })).toBe(id);
  await q.processDue();
  expect(calls).toBe(1);
  expect(q.enqueue("flaky", {}, { uniqueKey: "k", expedite: true })).toBe(id);
  await q.processDue();
  expect(calls).toBe(2);
  expect(q.get(id)!.state).toBe("completed");
});

test("retries failing for the same reason get one line a minute with how many were held back; a new reason at once", async () => {
  const q = queue(undefined, { backoff: { baseMs: 10, capMs: 10 } });
  let reason = "渠道不可用";
  q.register(
    "replicate",
    () => {
      throw new Error(reason);
    },
    { concurrency: 5 },
  );
  for (let blob = 0; blob < 5; blob++) q.enqueue("replicate", { blob });
  expect(await q.processDue()).toBe(5);
  const warns = () => logs.filter((l) => l.level === "warn" && l.msg === "任务失败，稍后重试");
  expect(warns()).toHaveLength(1);
  // Another reason is news: logged at once.
  reason = "磁盘已满";
  clock += 20;
  expect(await q.processDue()).toBe(5);
  expect(warns()).toHaveLength(2);
  // A minute on, the first reason again: one line saying how many were held back meanwhile.
  reason = "渠道不可用";
  clock += 60_000;
  expect(await q.processDue()).toBe(5);
  expect(warns()).toHaveLength(3);
  expect(warns().map((l) => l.fields?.held_back)).toEqual([0, 0, 4]);
});
