// The master-key check at start reads the stored fingerprint before anything is written. After a
// crash in the middle of a WAL checkpoint, the database file alone is half copied from the WAL;
// the check must still read the right fingerprint (through the WAL), not fail with "malformed".
import type { Database } from "bun:sqlite";
import { afterEach, expect, test } from "bun:test";
import { closeSync, copyFileSync, mkdtempSync, openSync, readdirSync, readFileSync, rmSync, writeSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { storedFingerprint } from "../../src/boot";
import { writeMeta } from "../../src/db/meta";
import { migrate, openDatabase } from "../../src/db/open";

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});
const tempDir = () => {
  const d = mkdtempSync(join(tmpdir(), "kura-fingerprint-"));
  dirs.push(d);
  return d;
};

/** Copies the latest WAL frame of `page` into the database file, as a checkpoint cut short after that page would. */
function copyOnePageFromWal(dbPath: string, page: number) {
  const wal = readFileSync(`${dbPath}-wal`);
  const pageSize = wal.readUInt32BE(8);
  let latest: Buffer | undefined;
  for (let at = 32; at + 24 + pageSize <= wal.length; at += 24 + pageSize) {
    if (wal.readUInt32BE(at) === page) latest = wal.subarray(at + 24, at + 24 + pageSize);
  }
  expect(latest).toBeDefined();
  const fd = openSync(dbPath, "r+");
  writeSync(fd, latest!, 0, pageSize, (page - 1) * pageSize);
  closeSync(fd);
}

/** A database whose fingerprint is in the file, with the meta table rebuilt since, in the WAL only. */
function databaseWithPendingWal(dir: string): Database {
  const db = openDatabase(join(dir, "kura.db"));
  migrate(db);
  writeMeta(db, "master_key_fingerprint", "fp-1234");
  db.exec("PRAGMA wal_checkpoint(TRUNCATE)");
  db.exec("PRAGMA wal_autocheckpoint = 0");
  // Enough rows to split the meta table's root into an interior page over new leaves.
  db.transaction(() => {
    for (let i = 0; i < 400; i++) writeMeta(db, `filler-${i}`, "x".repeat(200));
  })();
  return db;
}

test("a clean database: the fingerprint is read from the file alone", () => {
  const dir = tempDir();
  const db = databaseWithPendingWal(dir);
  db.exec("PRAGMA wal_checkpoint(TRUNCATE)");
  expect(storedFingerprint(join(dir, "kura.db"))).toBe("fp-1234");
  db.close();
});

test("after a crash in the middle of a checkpoint the fingerprint is still read, through the WAL", () => {
  const dir = tempDir();
  const db = databaseWithPendingWal(dir);
  const root = (db.query("SELECT rootpage FROM sqlite_master WHERE name = 'meta'").get() as { rootpage: number }).rootpage;
  // The files as a crash leaves them: the database, its WAL and the WAL index, no live connection.
  const crashed = tempDir();
  for (const suffix of ["", "-wal", "-shm"]) copyFileSync(join(dir, `kura.db${suffix}`), join(crashed, `kura.db${suffix}`));
  db.close();
  copyOnePageFromWal(join(crashed, "kura.db"), root);
  const files = () => readdirSync(crashed).map((f) => `${f}:${readFileSync(join(crashed, f)).toString("base64")}`);
  const before = files();
  expect(storedFingerprint(join(crashed, "kura.db"))).toBe("fp-1234");
  // Read without touching anything: the key check runs before the server may write.
  expect(files()).toEqual(before);
});
