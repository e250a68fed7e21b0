/**
 * Fault tier: the first start of a new version copies the database before migrating it. On a disk
 * that cannot hold the copy, the start used to write it until the disk was full, delete it and end
 * with SQLite's English words; under `Restart=always` that repeated every 2 s. Now it refuses
 * before writing anything, in Chinese, with the sizes, and the database stays as it was.
 */
import { Database } from "bun:sqlite";
import { afterAll, expect, test } from "bun:test";
import { copyFileSync, mkdtempSync, readdirSync, rmSync, statfsSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { MasterKey } from "../../src/config/master-key";
import { MIGRATIONS } from "../../src/db/migrations";
import { migrate, openDatabase, schemaVersion } from "../../src/db/open";
import { runCli } from "../helpers/server";
import { mountTmpfs } from "./harness";

const mounts: { unmount: () => void }[] = [];
afterAll(() => {
  for (const m of mounts) m.unmount();
});

const freeBytes = (dir: string) => {
  const fs = statfsSync(dir);
  return fs.bavail * fs.bsize;
};

test("an upgrade whose copy does not fit is refused before writing, says so in Chinese, and leaves the database as it was", async () => {
  const disk = mountTmpfs(6);
  mounts.push(disk);
  const dir = disk.dir;
  const { key, text } = MasterKey.generate();
  writeFileSync(join(dir, "master.key"), `${text}\n`, { mode: 0o600 });
  // Built elsewhere and copied in: its WAL would not fit beside it on the small disk.
  const build = mkdtempSync(join(tmpdir(), "kura-upgrade-copy-"));
  const db = openDatabase(join(build, "kura.db"));
  const from = MIGRATIONS.at(-2)!.version;
  migrate(db, MIGRATIONS.slice(0, -1));
  db.query("INSERT INTO meta (key, value) VALUES ('master_key_fingerprint', ?)").run(key.fingerprint);
  // ~3.5 MiB of rows the copy must hold (random bytes: nothing in SQLite shrinks them).
  db.exec("CREATE TABLE filler (b BLOB)");
  for (let i = 0; i < 56; i++) db.query("INSERT INTO filler VALUES (randomblob(65536))").run();
  db.exec("PRAGMA wal_checkpoint(TRUNCATE)");
  db.close();
  copyFileSync(join(build, "kura.db"), join(dir, "kura.db"));
  rmSync(build, { recursive: true, force: true });
  const before = readdirSync(dir).sort();
  const freeBefore = freeBytes(dir);
  expect(freeBefore).toBeLessThan(3.5 * 1024 * 1024);

  for (let start = 0; start < 2; start++) {
    const r = await runCli(["serve"], { KURA_DATA_DIR: dir, KURA_LISTEN: "127.0.0.1:0" });
    expect(r.code, r.err).toBe(1);
    const errors = r.err.split("\n").filter((l) => l.includes("level=ERROR"));
    expect(errors).toHaveLength(1);
    expect(errors[0]).toMatch(
      new RegExp(`msg=启动失败 err="?磁盘空间不足：升级前需在 ${dir} 保存一份数据库副本（约 [45] MiB），可用仅 [0-3] MiB；数据库未改动，请腾出空间后再启动`),
    );
    expect(r.err).not.toContain("database or disk is full");
  }
  // Nothing written: no copy, no partial copy, the same free space, the old schema.
  const ours = (names: string[]) => names.filter((f) => !f.startsWith("kura.db-") && f !== "kura.lock").sort();
  expect(ours(readdirSync(dir))).toEqual(ours(before));
  expect(readdirSync(dir).some((f) => f.includes("before-migration"))).toBe(false);
  expect(Math.abs(freeBytes(dir) - freeBefore)).toBeLessThan(256 * 1024);
  const after = new Database(join(dir, "kura.db"), { readonly: true });
  try {
    expect(schemaVersion(after)).toBe(from);
  } finally {
    after.close();
  }
}, 60_000);
