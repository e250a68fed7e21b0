// The database lock breaker (src/db/lock-breaker.ts) on real SQLite connections: opened only by a
// lock another connection holds past the busy timeout, writes then fail at once, the probe keeps it
// open while the lock stays and closes it (the timeout back to 5 s) once the lock is gone.
import { Database } from "bun:sqlite";
import { afterEach, beforeEach, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { BUSY_TIMEOUT_MS, LockBreaker } from "../../src/db/lock-breaker";
import { openDatabase } from "../../src/db/open";
import { noticeServerFault, watchServerFaults } from "../../src/ops/server-faults";

let dir: string;
let db: Database;
let other: Database;
const lines: string[] = [];
const line = (level: string) => (msg: string, fields?: Record<string, unknown>) =>
  void lines.push(`${level} ${msg}${fields ? ` ${JSON.stringify(fields)}` : ""}`);
const log = { warn: line("WARN"), info: line("INFO") };
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), "kura-lock-breaker-"));
  db = openDatabase(join(dir, "kura.db"));
  db.run("CREATE TABLE t (x)");
  other = new Database(join(dir, "kura.db"));
  lines.length = 0;
});
afterEach(() => {
  other.close();
  db.close();
  rmSync(dir, { recursive: true, force: true });
});

const busyTimeout = () => (db.query("PRAGMA busy_timeout").get() as { timeout: number }).timeout;
const lockedError = () => {
  const before = busyTimeout();
  db.run("PRAGMA busy_timeout = 10"); // the wait itself is not the rule here
  try {
    db.run("INSERT INTO t VALUES (1)");
  } catch (err) {
    return err;
  } finally {
    db.run(`PRAGMA busy_timeout = ${before}`);
  }
  throw new Error("the write was not refused");
};

test("opened by a lock, it fails writes at once until its probe finds the lock gone", async () => {
  const breaker = new LockBreaker(db, log, 20);
  expect(busyTimeout()).toBe(BUSY_TIMEOUT_MS);
  breaker.noticed(new Error("disk I/O error")); // another fault: nothing changes
  expect([breaker.open, busyTimeout()]).toEqual([false, BUSY_TIMEOUT_MS]);

  other.run("BEGIN IMMEDIATE");
  breaker.noticed(lockedError());
  breaker.noticed(lockedError()); // already open: one WARN
  expect([breaker.open, busyTimeout(), lines]).toEqual([
    true,
    0,
    ['WARN 数据库被其他进程长时间锁定：锁释放前写入立即失败（503），不再逐个等待 {"wait_ms":5000}'],
  ]);
  const started = performance.now();
  expect(() => db.run("INSERT INTO t VALUES (2)")).toThrow("database is locked");
  expect(performance.now() - started).toBeLessThan(1_000); // a wait would be the whole busy timeout (5 s)

  await Bun.sleep(100); // several probes while the lock stays
  expect(breaker.open).toBe(true);
  other.run("ROLLBACK");
  for (const deadline = Date.now() + 2_000; breaker.open && Date.now() < deadline; ) await Bun.sleep(10);
  expect([breaker.open, busyTimeout(), lines.at(-1)]).toEqual([false, BUSY_TIMEOUT_MS, "INFO 数据库锁已释放，写入恢复正常"]);
  db.run("INSERT INTO t VALUES (3)"); // the probe's transaction is gone: a write works
  expect(db.inTransaction).toBe(false);
  await Bun.sleep(100); // closed: no probe runs any more
  expect(lines.filter((l) => l.startsWith("INFO"))).toEqual(["INFO 数据库锁已释放，写入恢复正常"]);
});

test("a probe never runs inside the connection's own transaction; a probe that fails for another reason closes it", async () => {
  const breaker = new LockBreaker(db, log, 20);
  other.run("BEGIN IMMEDIATE");
  breaker.noticed(lockedError());
  other.run("ROLLBACK");
  db.run("BEGIN"); // a transaction of the connection itself spans the next probes: they wait
  await Bun.sleep(100);
  expect(breaker.open).toBe(true);
  db.run("ROLLBACK");
  for (const deadline = Date.now() + 2_000; breaker.open && Date.now() < deadline; ) await Bun.sleep(10);
  expect(breaker.open).toBe(false);

  const closing = openDatabase(join(dir, "closing.db"));
  const holder = new Database(join(dir, "closing.db"));
  const gone = new LockBreaker(closing, log, 20);
  other.run("BEGIN IMMEDIATE");
  const locked = lockedError();
  other.run("ROLLBACK");
  holder.run("BEGIN IMMEDIATE");
  gone.noticed(locked);
  expect(gone.open).toBe(true);
  holder.run("ROLLBACK");
  holder.close();
  closing.close(); // the probe now fails, not for a lock: the breaker stops instead of probing forever
  for (const deadline = Date.now() + 2_000; gone.open && Date.now() < deadline; ) await Bun.sleep(10);
  expect(gone.open).toBe(false);
  // Told of a lock after its database closed: nothing to do, nothing logged.
  const before = lines.length;
  gone.noticed(locked);
  expect([gone.open, lines.length]).toEqual([false, before]);
});

test("it hears of faults through the server-fault watch until disposed", () => {
  const breaker = new LockBreaker(db, log, 20);
  breaker.stopWatching = watchServerFaults((err) => breaker.noticed(err));
  other.run("BEGIN IMMEDIATE");
  try {
    const locked = lockedError();
    breaker.dispose();
    noticeServerFault(locked);
    expect(breaker.open).toBe(false);
    breaker.stopWatching = watchServerFaults((err) => breaker.noticed(err));
    noticeServerFault(locked);
    expect(breaker.open).toBe(true);
    breaker.dispose();
    expect([breaker.open, busyTimeout()]).toEqual([false, BUSY_TIMEOUT_MS]);
  } finally {
    other.run("ROLLBACK");
  }
});

test("a report that arrives after the lock went does not open it: writes keep their busy timeout", () => {
  const breaker = new LockBreaker(db, log, 20);
  other.run("BEGIN IMMEDIATE");
  const locked = lockedError();
  other.run("ROLLBACK");
  breaker.noticed(locked);
  expect([breaker.open, busyTimeout(), lines, db.inTransaction]).toEqual([false, BUSY_TIMEOUT_MS, [], false]);

  // Heard inside the connection's own transaction, the lock cannot be asked about: the report is trusted.
  db.run("BEGIN");
  try {
    breaker.noticed(locked);
    expect([breaker.open, busyTimeout()]).toEqual([true, 0]);
  } finally {
    db.run("ROLLBACK");
    breaker.dispose();
  }
});
