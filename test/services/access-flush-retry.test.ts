/**
 * Buffered access counts survive a flush that could not write: the database locked by another
 * process (as an operator's `sqlite3 kura.db` inside a transaction would) or a disk failing. The
 * transaction wrote nothing, so the counts wait in memory for the next flush, each image with its
 * own last access, instead of being dropped. In-process over the real context and a real lock.
 */
import { Database } from "bun:sqlite";
import { expect, test } from "bun:test";
import { join } from "node:path";
import { sqlTime } from "../../src/db/time";
import { makeJpeg } from "../helpers/images";
import { type ServiceContext, serviceContextPerTest, uploadBytes } from "./harness";

let ctx: ServiceContext;
serviceContextPerTest((opened) => (ctx = opened));

test("a flush that met a write lock keeps its counts for the next flush", async () => {
  const { app, admin, dataDir } = ctx;
  const first = await uploadBytes(app, admin.id, await makeJpeg(40, 30, 1));
  const second = await uploadBytes(app, admin.id, await makeJpeg(40, 30, 2));
  const t0 = Date.parse("2026-11-20T10:00:00Z");
  app.access.add(first.id, 2, t0);
  app.access.add(second.id, 1, t0 + 5_000);

  const other = new Database(join(dataDir, "kura.db"));
  other.run("BEGIN IMMEDIATE");
  // The lock outlasts the busy timeout (shortened here: the 5 s wait itself is not the rule).
  app.db.exec("PRAGMA busy_timeout = 20");
  try {
    expect(() => app.access.flush()).toThrow(/database is locked/);
    app.access.add(first.id, 3, t0 + 60_000); // accesses meanwhile join the kept ones
  } finally {
    other.run("ROLLBACK");
    other.close();
    app.db.exec("PRAGMA busy_timeout = 5000");
  }
  expect([app.images.view(first.id)!.access_count, app.images.view(second.id)!.access_count]).toEqual([0, 0]);

  app.access.flush();
  const counts = (id: string) => {
    const row = app.images.view(id)!;
    return [row.access_count, row.last_public_access_at];
  };
  expect(counts(first.id)).toEqual([5, sqlTime(t0 + 60_000)]);
  expect(counts(second.id)).toEqual([1, sqlTime(t0 + 5_000)]);
  const usage = app.db.query("SELECT accesses FROM user_usage WHERE user_id = ?").get(admin.id) as { accesses: number };
  expect(usage.accesses).toBe(6);
  // Nothing is left to write twice.
  app.access.flush();
  expect(counts(first.id)).toEqual([5, sqlTime(t0 + 60_000)]);
}, 30_000);
