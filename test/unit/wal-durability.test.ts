// Which write waits for which fsync (src/db/durability.ts): a request that wrote nothing waits for
// none; one fsync covers every commit made before it began, so requests finishing together share
// it; a commit made while an fsync runs waits for the next one; a failed fsync fails its waiters
// and the next barrier tries again. Real SQLite commits, the fsync held by the test.
import { Database } from "bun:sqlite";
import { afterEach, beforeEach, expect, test } from "bun:test";
import { mkdtempSync, readdirSync, readlinkSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { WalDurability } from "../../src/db/durability";

let dir: string;
let db: Database;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), "kura-durability-"));
  db = new Database(join(dir, "kura.db"));
  db.run("PRAGMA journal_mode = WAL");
  db.run("CREATE TABLE t (x)");
});
afterEach(() => {
  db.close();
  rmSync(dir, { recursive: true, force: true });
});

/** An fsync the test ends by hand, and every call of it. */
function heldSyncs() {
  const calls: { end: (err?: Error) => void }[] = [];
  const sync = () =>
    new Promise<void>((resolve, reject) => {
      calls.push({ end: (err) => (err ? reject(err) : resolve()) });
    });
  return { calls, sync };
}
const write = () => db.run("INSERT INTO t VALUES (1)");
/** Whether `p` has settled after the pending callbacks ran. */
async function settled(p: Promise<unknown>): Promise<boolean> {
  let done = false;
  p.then(
    () => (done = true),
    () => (done = true),
  );
  await Bun.sleep(1);
  return done;
}

test("nothing written, nothing to wait for", async () => {
  const { calls, sync } = heldSyncs();
  db.run("INSERT INTO t VALUES (0)"); // before the durability existed: the start counts as durable
  const durability = new WalDurability(db, sync);
  await durability.barrier();
  db.query("SELECT * FROM t").all();
  await durability.barrier();
  expect(calls.length).toBe(0);
});

test("requests finishing together share one fsync; a commit during it waits for the next", async () => {
  const { calls, sync } = heldSyncs();
  const durability = new WalDurability(db, sync);
  write();
  const first = durability.barrier();
  const together = durability.barrier();
  await Bun.sleep(1);
  expect(calls.length).toBe(1);
  write(); // committed while the first fsync may already have passed it
  const later = durability.barrier();
  await Bun.sleep(1);
  expect(calls.length).toBe(1); // it waits for the running fsync to end before starting its own

  calls[0]!.end();
  await Promise.all([first, together]);
  expect(await settled(later)).toBe(false);
  await Bun.sleep(1);
  expect(calls.length).toBe(2);
  const sharesSecond = durability.barrier(); // nothing new since the second began
  calls[1]!.end();
  await Promise.all([later, sharesSecond]);
  expect(calls.length).toBe(2);
  await durability.barrier();
  expect(calls.length).toBe(2);
});

test("a failed fsync fails its waiters; the next barrier syncs again", async () => {
  const { calls, sync } = heldSyncs();
  const durability = new WalDurability(db, sync);
  write();
  const failing = durability.barrier();
  await Bun.sleep(1);
  calls[0]!.end(new Error("EIO: i/o error, fsync"));
  expect(failing).rejects.toThrow("EIO");
  await failing.catch(() => {});
  const retried = durability.barrier();
  await Bun.sleep(1);
  expect(calls.length).toBe(2);
  calls[1]!.end();
  await retried;
});

test("the real fsync: of the WAL file, and none needed before there is one", async () => {
  const fresh = new Database(join(dir, "other.db"));
  try {
    const journal = new WalDurability(fresh);
    fresh.run("CREATE TABLE t (x)");
    fresh.run("INSERT INTO t VALUES (1)");
    await journal.barrier(); // a rollback-journal database has no WAL: its commits synced themselves
  } finally {
    fresh.close();
  }
  const durability = new WalDurability(db);
  /** This process's descriptors open on the WAL file (SQLite's own, and the one the fsync keeps). */
  const walDescriptors = () => readdirSync("/proc/self/fd").filter((fd) => readlinkOr(`/proc/self/fd/${fd}`) === `${db.filename}-wal`).length;
  const sqliteOwn = walDescriptors();
  write();
  await durability.barrier();
  expect(walDescriptors()).toBe(sqliteOwn + 1); // the WAL itself was opened for the fsync
  write();
  await durability.barrier();
  expect(walDescriptors()).toBe(sqliteOwn + 1); // and that descriptor is kept, not opened again
});

function readlinkOr(path: string): string | undefined {
  try {
    return readlinkSync(path);
  } catch {
    return undefined; // closed meanwhile (the listing's own descriptor)
  }
}

test("a dropped WalDurability never leaves its WAL handle to the garbage collector (an error in Bun, thrown into a later test)", async () => {
  const errors: unknown[] = [];
  const onError = (err: unknown) => errors.push(err);
  process.on("uncaughtException", onError);
  try {
    for (let i = 0; i < 3; i++) {
      const durability = new WalDurability(db);
      write();
      await durability.barrier();
    }
    for (let i = 0; i < 5; i++) {
      Bun.gc(true);
      await Bun.sleep(5);
    }
  } finally {
    process.off("uncaughtException", onError);
  }
  expect(errors.map(String)).toEqual([]);
});
