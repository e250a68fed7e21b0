import { afterEach, beforeEach, describe, expect, test } from "bun:test";
import type { Database } from "bun:sqlite";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { GroupCommit } from "../../src/db/group-commit";
import { openDatabase } from "../../src/db/open";

/**
 * Commits made since the WAL was emptied, read from the WAL file itself: the last frame of
 * each commit carries the database size after it (bytes 4-7 of the frame header), every
 * other frame zero.
 */
function commitsInWal(db: Database): number {
  const wal = readFileSync(`${db.filename}-wal`);
  const pageSize = wal.readUInt32BE(8);
  let commits = 0;
  for (let offset = 32; offset + 24 + pageSize <= wal.length; offset += 24 + pageSize) if (wal.readUInt32BE(offset + 4) !== 0) commits++;
  return commits;
}

const names = (db: Database) => (db.query("SELECT name FROM item ORDER BY name").all() as { name: string }[]).map((r) => r.name);

describe("group commit", () => {
  let dir: string;
  let db: Database;
  let group: GroupCommit;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), "kura-group-commit-"));
    db = openDatabase(join(dir, "t.db"));
    db.exec("PRAGMA wal_autocheckpoint = 0");
    db.exec("CREATE TABLE parent (id INTEGER PRIMARY KEY); CREATE TABLE item (name TEXT PRIMARY KEY, parent INTEGER REFERENCES parent(id))");
    db.exec("PRAGMA wal_checkpoint(TRUNCATE)");
    group = new GroupCommit(db);
  });
  afterEach(() => {
    db.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const insert = (name: string) => () => db.query("INSERT INTO item (name) VALUES (?)").run(name).changes;

  test("units handed in during one turn share one commit; units in separate turns commit separately", async () => {
    const together = await Promise.all(["a", "b", "c", "d", "e"].map((n) => group.run(insert(n))));
    expect(together).toEqual([1, 1, 1, 1, 1]);
    expect(commitsInWal(db)).toBe(1);
    for (const n of ["f", "g", "h"]) await group.run(insert(n));
    expect(commitsInWal(db)).toBe(4);
    expect(names(db)).toEqual(["a", "b", "c", "d", "e", "f", "g", "h"]);
  });

  /** Settled outcomes in order: the value, or the error's message. */
  const settle = async (units: Promise<unknown>[]) =>
    (await Promise.allSettled(units)).map((r) => (r.status === "fulfilled" ? r.value : (r.reason as Error).message));

  test("a unit that throws is undone alone: the others of its batch commit", async () => {
    const outcomes = await settle([
      group.run(() => {
        insert("half-done")();
        throw new Error("配额不足");
      }),
      group.run(insert("a")),
      group.run(insert("a")),
      group.run(insert("b")),
    ]);
    expect(outcomes[0]).toBe("配额不足");
    expect(outcomes[1]).toBe(1);
    expect(outcomes[2]).toMatch(/UNIQUE/);
    expect(outcomes[3]).toBe(1);
    expect(names(db)).toEqual(["a", "b"]);
    expect(commitsInWal(db)).toBe(1);
  });

  test("when the commit itself fails, every unit of the batch rejects and nothing is kept", async () => {
    const outcomes = await settle([
      group.run(insert("fine")),
      // A deferred foreign-key violation passes the unit's savepoint and fails only at COMMIT.
      group.run(() => {
        db.exec("PRAGMA defer_foreign_keys = ON");
        return db.query("INSERT INTO item (name, parent) VALUES ('orphan', 42)").run().changes;
      }),
    ]);
    expect(outcomes).toEqual([expect.stringMatching(/FOREIGN KEY/), expect.stringMatching(/FOREIGN KEY/)]);
    expect(names(db)).toEqual([]);
    expect(db.inTransaction).toBe(false);
    // The next batch is unaffected.
    expect(await group.run(insert("next"))).toBe(1);
    expect(names(db)).toEqual(["next"]);
  });
});
