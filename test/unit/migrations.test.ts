import { expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { MIGRATIONS } from "../../src/db/migrations";
import { migrate, openDatabase, schemaVersion, SchemaTooNewError } from "../../src/db/open";

function withDb(fn: (path: string) => void) {
  const dir = mkdtempSync(join(tmpdir(), "kura-mig-"));
  try {
    fn(join(dir, "kura.db"));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

test("an older database is brought up to date step by step, each step recorded", () =>
  withDb((path) => {
    const db = openDatabase(path);
    expect(migrate(db, MIGRATIONS.slice(0, 1))).toEqual([1]);
    expect(schemaVersion(db)).toBe(1);
    expect(migrate(db)).toEqual(MIGRATIONS.slice(1).map((m) => m.version));
    expect(schemaVersion(db)).toBe(MIGRATIONS.at(-1)!.version);
    expect(migrate(db)).toEqual([]);
    const recorded = db
      .query<{ name: string }, []>("SELECT name FROM schema_migrations ORDER BY version")
      .all()
      .map((r) => r.name);
    expect(recorded).toEqual(MIGRATIONS.map((m) => m.name));
    db.close();
  }));

test("a failing migration rolls back entirely and is not recorded", () =>
  withDb((path) => {
    const db = openDatabase(path);
    migrate(db);
    const latest = schemaVersion(db);
    const broken = [...MIGRATIONS, { version: latest + 1, name: "broken.sql", sql: "CREATE TABLE half_done (x); SELECT * FROM no_such_table;" }];
    expect(() => migrate(db, broken)).toThrow();
    expect(schemaVersion(db)).toBe(latest);
    expect(db.query("SELECT 1 FROM sqlite_master WHERE name = 'half_done'").get()).toBeNull();
    db.close();
  }));

test("a database newer than the migrations refuses", () =>
  withDb((path) => {
    const db = openDatabase(path);
    migrate(db);
    expect(() => migrate(db, MIGRATIONS.slice(0, 2))).toThrow(SchemaTooNewError);
    db.close();
  }));
