import { expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { MIGRATIONS } from "../../src/db/migrations";
import { migrate, openDatabase } from "../../src/db/open";
import { blobDigests } from "../../src/images/repos/blob-md5";

/**
 * Migration 0015: tokens issued by POST /api/v1/tokens before it are recognised by the name that
 * endpoint gives (lsky-<YYYYMMDDHHMMSS>-<6 hex>), so DELETE /api/v1/tokens revokes them too and no
 * other; blobs get an empty (unknown) sha1.
 */
test("existing Lsky-issued tokens are marked by their name; other tokens and blobs keep their state", () => {
  const dir = mkdtempSync(join(tmpdir(), "kura-mig15-"));
  try {
    const db = openDatabase(join(dir, "kura.db"));
    const index = MIGRATIONS.findIndex((m) => m.name === "0015_lsky_tokens_sha1.sql");
    migrate(db, MIGRATIONS.slice(0, index));
    db.exec("INSERT INTO users (id, name, role, password_hash, created_at) VALUES ('u', 'u', 'user', 'x', '2025-01-01 00:00:00')");
    const token = db.query("INSERT INTO tokens (user_id, name, prefix, secret_hash, created_at) VALUES ('u', ?, ?, 'h', '2025-01-01 00:00:00')");
    const names = [
      "lsky-20260102030405-a1b2c3",
      "lsky-2026010203040-a1b2c3",
      "lsky-20260102030405-A1B2C3",
      "lsky-laptop",
      "sharex",
      "lsky-20260102030405-a1b2c3x",
    ];
    for (const [i, name] of names.entries()) token.run(name, `kura_prefix${i}`);
    db.exec(
      "INSERT INTO blobs (sha256, storage_key, mime, size, width, height, ref_count, created_at, md5) VALUES ('a', 'k', 'image/png', 1, 1, 1, 1, '2025-01-01', 'm')",
    );
    migrate(db);
    const via = db.query<{ name: string; issued_via: string }, []>("SELECT name, issued_via FROM tokens ORDER BY id").all();
    expect(via).toEqual(names.map((name, i) => ({ name, issued_via: i === 0 ? "lsky" : "" })));
    expect(db.query("SELECT md5, sha1 FROM blobs").all()).toEqual([{ md5: "m", sha1: "" }]);
    db.close();
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

/** The Lsky list's digests for a page: one primary-key search per item, whatever the library's size. */
test("the list's digest read is a primary-key search of blobs", () => {
  const dir = mkdtempSync(join(tmpdir(), "kura-mig15-"));
  try {
    const db = openDatabase(join(dir, "kura.db"));
    migrate(db);
    const insert = db.query(
      "INSERT INTO blobs (sha256, storage_key, mime, size, width, height, created_at, md5, sha1) VALUES (?, 'k', 'image/png', 1, 1, 1, '2025-01-01', ?, ?)",
    );
    insert.run("a", "m1", "s1");
    insert.run("b", "", "");
    const statements: string[] = [];
    const query = db.query.bind(db);
    db.query = ((sql: string) => {
      statements.push(sql);
      return query(sql);
    }) as typeof db.query;
    expect(blobDigests(db, [1, 2, 3])).toEqual(
      new Map([
        [1, { md5: "m1", sha1: "s1" }],
        [2, { md5: "", sha1: "" }],
      ]),
    );
    expect(statements.length).toBe(1);
    const plan = query(`EXPLAIN QUERY PLAN ${statements[0]}`)
      .all("[1]")
      .map((r) => (r as { detail: string }).detail);
    expect(plan.some((d) => /SEARCH blobs USING INTEGER PRIMARY KEY/.test(d))).toBe(true);
    expect(plan.some((d) => /SCAN blobs/.test(d))).toBe(false);
    db.close();
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
