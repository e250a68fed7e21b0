/**
 * Damage in database pages the running service has not read (a table no request touches) surfaces in
 * the next backup round, which reads every row: the round fails with the advice to check and restore
 * (not "see the log"), opens backup_failed, and keeps every snapshot taken before.
 */
import { Database } from "bun:sqlite";
import { afterAll, beforeAll, expect, test } from "bun:test";
import { openSync, writeSync, closeSync } from "node:fs";
import { join } from "node:path";
import { adminSession, expectError, type Session } from "../helpers/client";
import { KuraServer } from "../helpers/server";

let server: KuraServer;
let admin: Session;
beforeAll(async () => {
  server = await KuraServer.start();
  admin = await adminSession(server);
});
afterAll(() => server.dispose());

/** Gives `table`'s root page a bogus b-tree header on disk, after moving the WAL's pages into the file. */
function damageOnDisk(table: string) {
  const path = join(server.dataDir, "kura.db");
  const db = new Database(path);
  db.exec("PRAGMA wal_checkpoint(TRUNCATE)");
  const { rootpage } = db.query<{ rootpage: number }, [string]>("SELECT rootpage FROM sqlite_schema WHERE name = ?").get(table)!;
  const pageSize = db.query<{ page_size: number }, []>("PRAGMA page_size").get()!.page_size;
  db.close();
  const fd = openSync(path, "r+");
  writeSync(fd, Buffer.from([0x0d, 0xff, 0xff, 0xff, 0xff, 0, 0, 0]), 0, 8, (rootpage - 1) * pageSize);
  closeSync(fd);
}

test("a backup over a damaged table fails with the advice to check and restore; earlier snapshots stay", async () => {
  const first = await admin.json("POST", "/api/admin/backups", undefined, 201);
  damageOnDisk("dedup_candidates");
  const res = await admin.request("POST", "/api/admin/backups");
  expect(await expectError(res, 503)).toMatch(/^生成数据库快照失败：数据库文件已损坏。.*kura check.*kura restore/);
  await server.waitForLog(/level=ERROR msg=生成数据库快照时发现数据库文件已损坏 err=".*malformed/);
  const alerts = (await admin.json("GET", "/api/admin/alerts")).items as { kind: string; message: string }[];
  expect(alerts.find((a) => a.kind === "backup_failed")?.message).toMatch(/数据库文件已损坏/);
  const snapshots = (await admin.json("GET", "/api/admin/backups")).items as { name: string }[];
  expect(snapshots.map((s) => s.name)).toEqual([first.name]);
});
