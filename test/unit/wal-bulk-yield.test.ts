import { afterEach, beforeEach, describe, expect, test } from "bun:test";
import { Database } from "bun:sqlite";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { bulkWriteBegins, WalCheckpointer } from "../../src/db/checkpointer";
import { openDatabase } from "../../src/db/open";
import { drainInSlices } from "../../src/db/sliced";

const ROWS = 8_000;
const autocheckpoint = (db: Database) => (db.query("PRAGMA wal_autocheckpoint").get() as { wal_autocheckpoint: number }).wal_autocheckpoint;

/** Rewrites every row once (~8 MiB of WAL) in drainInSlices slices; `each` runs before each step. */
function rewriteAll(db: Database, each: () => void = () => {}): Promise<number> {
  const update = db.query<unknown, [number, number]>("UPDATE big SET v = v + 1, pad = randomblob(1000) WHERE id > ? AND id <= ?");
  let cursor = 0;
  return drainInSlices(
    db,
    (limit) => {
      each();
      const changed = update.run(cursor, cursor + limit).changes;
      cursor += limit;
      return changed;
    },
    50,
  );
}

/**
 * Rewrites every row until a slice has waited for the checkpointer (`waited`); returns the time of
 * the last pass. A slice waits once the worker has reported the long WAL, and a CPU-starved worker
 * (a loaded CI machine) may report only after the whole pass: then a bulk writer stays registered
 * until the report has marked the restart due, and the next pass's first slice waits.
 */
async function rewriteUntilWaited(db: Database, checkpointer: WalCheckpointer, waited: () => boolean): Promise<number> {
  const ended = bulkWriteBegins(db);
  try {
    let started = performance.now();
    expect(await rewriteAll(db)).toBe(ROWS);
    if (!waited()) {
      const internals = checkpointer as unknown as { restartDue: boolean };
      const deadline = Date.now() + 15_000;
      while (!internals.restartDue && Date.now() < deadline) await Bun.sleep(5);
      started = performance.now();
      expect(await rewriteAll(db)).toBe(ROWS);
    }
    return performance.now() - started;
  } finally {
    ended();
  }
}

/** What keeps a bulk writer's wait for the checkpointer bounded (the mass case: test/scale/wal-bulk-yield.test.ts). */
describe("bulk writers yield to the WAL checkpointer, within bounds", () => {
  let dir: string;
  let db: Database;
  let warnings: string[];
  let checkpointer: WalCheckpointer | undefined;
  const log = { warn: (msg: string) => void warnings.push(msg) };

  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), "kura-bulk-yield-"));
    db = openDatabase(join(dir, "t.db"));
    db.exec("CREATE TABLE big (id INTEGER PRIMARY KEY, v INTEGER, pad BLOB)");
    const insert = db.query("INSERT INTO big (id, v, pad) VALUES (?, 0, randomblob(1000))");
    db.transaction(() => {
      for (let i = 1; i <= ROWS; i++) insert.run(i);
    })();
    db.exec("PRAGMA wal_checkpoint(TRUNCATE)");
    warnings = [];
  });
  afterEach(async () => {
    await checkpointer?.stop();
    checkpointer = undefined;
    db.close();
    rmSync(dir, { recursive: true, force: true });
  });

  test("a reader's old snapshot keeps the WAL from being copied whole: the drain waits once, for the bound only", async () => {
    checkpointer = new WalCheckpointer(db, log, { intervalMs: 5, restartBytes: 1024 * 1024, yieldTimeoutMs: 300 });
    checkpointer.start();
    db.exec("UPDATE big SET v = 1 WHERE id <= 100");
    // Like a delivery thread in the middle of a read: frames written after its snapshot stay in the WAL.
    const reader = new Database(db.filename, { readonly: true });
    reader.exec("BEGIN");
    reader.query("SELECT count(*) FROM big").get();
    try {
      const took = await rewriteUntilWaited(db, checkpointer, () => checkpointer!.stats.yields > 0);
      console.log(`drain behind a held snapshot: ${took.toFixed(0)} ms`, checkpointer.stats);
      expect(checkpointer.stats.yields).toBeGreaterThan(0);
      // One wait past the bound; then no more waits until the WAL has started over.
      expect(checkpointer.stats.yieldTimeouts).toBe(1);
      expect(took).toBeLessThan(300 * 3 + 2000);
      expect(checkpointer.stats.restarts).toBe(0);
    } finally {
      reader.exec("COMMIT");
      reader.close();
    }
    // The reader gone, the next drain finds the worker able to copy everything again.
    await checkpointer.settle();
    await rewriteAll(db);
    await checkpointer.settle();
    expect(checkpointer.stats.restarts).toBeGreaterThan(0);
    expect(warnings).toEqual([]);
  }, 20_000);

  test("a worker that dies while a drain waits for it wakes the drain, and SQLite's automatic checkpoint comes back", async () => {
    checkpointer = new WalCheckpointer(db, log, { intervalMs: 5, restartBytes: 1024 * 1024, yieldTimeoutMs: 60_000 });
    checkpointer.start();
    const internals = checkpointer as unknown as { worker?: Worker };
    // A reader's old snapshot keeps the worker from copying the WAL whole, so the drain surely
    // waits (without it a fast worker may keep up and no slice ever waits). The worker is killed
    // the moment the first wait begins: no polling that a loaded machine can miss.
    const reader = new Database(db.filename, { readonly: true });
    reader.exec("BEGIN");
    reader.query("SELECT count(*) FROM big").get();
    let killedAt = 0;
    const bulkTurn = checkpointer.bulkTurn.bind(checkpointer);
    checkpointer.bulkTurn = () => {
      const turn = bulkTurn();
      if (turn && !killedAt) {
        killedAt = performance.now();
        internals.worker?.terminate();
      }
      return turn;
    };
    try {
      await rewriteUntilWaited(db, checkpointer, () => killedAt > 0);
    } finally {
      reader.exec("COMMIT");
      reader.close();
    }
    expect(killedAt).toBeGreaterThan(0);
    // Woken by the death, not by the (one-minute) bound.
    expect(performance.now() - killedAt).toBeLessThan(10_000);
    expect(checkpointer.stats.yieldTimeouts).toBe(0);
    expect(autocheckpoint(db)).toBe(1000);
    expect(warnings).toEqual(["后台 WAL 检查点线程失败，改由 SQLite 自动检查点"]);
    // Fallen back, bulk writers no longer wait at all.
    const yields = checkpointer.stats.yields;
    await rewriteAll(db);
    expect(checkpointer.stats.yields).toBe(yields);
  }, 20_000);
});
