import type { Database } from "bun:sqlite";
import { afterEach, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import fc from "fast-check";
import { MIGRATIONS } from "../../src/db/migrations";
import { migrate, openDatabase } from "../../src/db/open";
import { fileNameBacklogSize, indexFileNameBacklog, rebuildFileNameIndex } from "../../src/images/repos/file-name-index";
import { imageConditions, whereOf } from "../../src/images/repos/image-filter";
import { fuzzParams } from "../fuzz/fuzz-support";

// File-name search reads two places: the FTS5 index and the backlog of names not indexed yet.
// Whatever order uploads, deletes and index rounds come in, a search must find exactly the
// images whose name contains the term, and the FTS5 index must stay consistent with `images`.

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

/** A migrated database (up to `version`) with one user and one blob to hang images on. */
function database(version = MIGRATIONS.at(-1)!.version): Database {
  const dir = mkdtempSync(join(tmpdir(), "kura-fts-"));
  dirs.push(dir);
  const db = openDatabase(join(dir, "kura.db"));
  migrate(
    db,
    MIGRATIONS.filter((m) => m.version <= version),
  );
  db.run("INSERT INTO users (id, name, role, password_hash, created_at) VALUES ('u1', 'u1', 'user', 'x', '2026-01-01 00:00:00')");
  db.run(
    "INSERT INTO blobs (sha256, storage_key, mime, size, width, height, ref_count, created_at) VALUES ('s', 'k', 'image/png', 1, 1, 1, 0, '2026-01-01 00:00:00')",
  );
  return db;
}

let seq = 0;
const insertImage = (db: Database, name: string) =>
  Number(
    db.query("INSERT INTO images (id, blob_id, user_id, file_name, created_at) VALUES (?, 1, 'u1', ?, '2026-01-01 00:00:00')").run(`img${++seq}`, name)
      .lastInsertRowid,
  );

/** What the API's search finds: the list's own condition over `images i`. */
function searched(db: Database, term: string): number[] {
  const { sql, args } = imageConditions({ search: term });
  return db
    .query<{ rowid: number }, (string | number)[]>(`SELECT i.rowid FROM images i ${whereOf(sql)} ORDER BY i.rowid`)
    .all(...args)
    .map((r) => r.rowid);
}

/** The same search by brute force (the names use no letters whose case folding differs between LIKE and FTS5). */
function scanned(db: Database, term: string): number[] {
  const needle = term.toLowerCase();
  return db
    .query<{ rowid: number; file_name: string }, []>("SELECT rowid, file_name FROM images ORDER BY rowid")
    .all()
    .filter((r) => r.file_name.toLowerCase().includes(needle))
    .map((r) => r.rowid);
}

/** FTS5's own check that the index holds exactly the content table's names. */
const integrityCheck = (db: Database) => db.run("INSERT INTO images_fts (images_fts) VALUES ('integrity-check')");

const nameChar = fc.constantFrom(..."abcAB_%\\\"'.- 12猫图片");
const fileName = fc.array(nameChar, { minLength: 1, maxLength: 12 }).map((c) => c.join(""));
type Step = { op: "upload"; name: string } | { op: "delete"; pick: number } | { op: "index"; limit: number } | { op: "rename"; pick: number; name: string };
const step: fc.Arbitrary<Step> = fc.oneof(
  { weight: 5, arbitrary: fileName.map((name) => ({ op: "upload" as const, name })) },
  { weight: 2, arbitrary: fc.nat().map((pick) => ({ op: "delete" as const, pick })) },
  { weight: 2, arbitrary: fc.integer({ min: 1, max: 6 }).map((limit) => ({ op: "index" as const, limit })) },
  { weight: 1, arbitrary: fc.tuple(fc.nat(), fileName).map(([pick, name]) => ({ op: "rename" as const, pick, name })) },
);

test("search finds exactly the names containing the term, whatever mix of indexed and backlog images", () => {
  const db = database();
  fc.assert(
    fc.property(fc.array(step, { minLength: 1, maxLength: 40 }), fc.array(fileName, { maxLength: 6 }), (steps, extraTerms) => {
      db.run("DELETE FROM images");
      for (const s of steps) {
        const rowids = db.query<{ rowid: number }, []>("SELECT rowid FROM images ORDER BY rowid").all();
        if (s.op === "upload") insertImage(db, s.name);
        else if (s.op === "index") indexFileNameBacklog(db, s.limit);
        else if (rowids.length > 0) {
          const target = rowids[s.pick % rowids.length]!.rowid;
          if (s.op === "delete") db.run("DELETE FROM images WHERE rowid = ?", [target]);
          else db.run("UPDATE images SET file_name = ? WHERE rowid = ?", [s.name, target]);
        }
      }
      integrityCheck(db);
      const names = db
        .query<{ file_name: string }, []>("SELECT file_name FROM images")
        .all()
        .map((r) => r.file_name);
      // Terms that hit: slices of real names (long enough for the FTS5 path and short ones for LIKE).
      const terms = [...names.flatMap((n) => [n, n.slice(1, 5), n.slice(0, 2)]), ...extraTerms].filter((t) => t.length > 0);
      for (const term of terms) expect(searched(db, term)).toEqual(scanned(db, term));
    }),
    fuzzParams(),
  );
});

test("a search never scans every image: FTS5 answers, and only the backlog is scanned", () => {
  const db = database();
  for (const term of ["holiday", "ho"]) {
    const { sql, args } = imageConditions({ search: term });
    const plan = db
      .query<{ detail: string }, (string | number)[]>(`EXPLAIN QUERY PLAN SELECT COUNT(*) FROM images i ${whereOf(sql)}`)
      .all(...args)
      .map((r) => r.detail);
    const fullScans = plan.filter((line) => /^SCAN (i|n)\b/.test(line));
    // Short terms have no index to use (LIKE on every name: the table, or a covering index of the
    // names such as images_user_name); long ones must not scan at all.
    if (term.length >= 3) expect(fullScans).toEqual([]);
    else expect(fullScans).toEqual([expect.stringMatching(/^SCAN i( USING COVERING INDEX \w+)?$/)]);
  }
});

test("a round indexes at most its limit, oldest first, and the backlog empties", () => {
  const db = database();
  const ids = Array.from({ length: 7 }, (_, i) => insertImage(db, `holiday-${i}.jpg`));
  expect(fileNameBacklogSize(db)).toBe(7);
  expect(db.query("SELECT COUNT(*) AS n FROM images_fts WHERE images_fts MATCH '\"holiday\"'").get()).toEqual({ n: 0 });
  expect(searched(db, "holiday")).toEqual(ids);
  expect(indexFileNameBacklog(db, 3)).toBe(3);
  const indexed = db
    .query<{ rowid: number }, []>("SELECT rowid FROM images_fts WHERE images_fts MATCH '\"holiday\"' ORDER BY rowid")
    .all()
    .map((r) => r.rowid);
  expect(indexed).toEqual(ids.slice(0, 3));
  expect(indexFileNameBacklog(db, 3)).toBe(3);
  expect(indexFileNameBacklog(db, 3)).toBe(1);
  expect(indexFileNameBacklog(db, 3)).toBe(0);
  expect(fileNameBacklogSize(db)).toBe(0);
  expect(searched(db, "holiday")).toEqual(ids);
  integrityCheck(db);
});

test("a rebuild indexes everything and empties the backlog", () => {
  const db = database();
  const ids = [insertImage(db, "cat-one.png"), insertImage(db, "cat-two.png")];
  rebuildFileNameIndex(db);
  expect(fileNameBacklogSize(db)).toBe(0);
  expect(searched(db, "cat-")).toEqual(ids);
  db.run("DELETE FROM images WHERE rowid = ?", [ids[0]!]);
  integrityCheck(db);
  expect(searched(db, "cat-")).toEqual([ids[1]!]);
});

test("images indexed before the backlog existed (schema 7) stay searchable and deletable after the upgrade", () => {
  const db = database(7);
  const old = [insertImage(db, "sunset-a.jpg"), insertImage(db, "sunset-b.jpg")];
  migrate(db);
  expect(fileNameBacklogSize(db)).toBe(0);
  const fresh = insertImage(db, "sunset-c.jpg");
  expect(searched(db, "sunset")).toEqual([...old, fresh]);
  db.run("DELETE FROM images WHERE rowid = ?", [old[0]!]);
  db.run("DELETE FROM images WHERE rowid = ?", [fresh]);
  integrityCheck(db);
  expect(searched(db, "sunset")).toEqual([old[1]!]);
});
