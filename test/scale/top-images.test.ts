/**
 * The dashboards' top images come from two partial reads (src/ops/repos/dashboard.ts): images
 * ever accessed from a partial index, then never-accessed ones newest first. Proven here on a
 * real migrated SQLite file: the result equals a brute-force sort of every image (all users
 * and one user), and both reads walk an index without sorting, so the list stays cheap at 1M.
 */
import type { Database } from "bun:sqlite";
import { afterAll, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import fc from "fast-check";
import { migrate, openDatabase } from "../../src/db/open";
import { sqlTime } from "../../src/db/time";
import { topImageRows, topImageSql } from "../../src/ops/repos/dashboard";
import { fuzzParams } from "../fuzz/fuzz-support";

const dir = mkdtempSync(join(tmpdir(), "kura-top-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const USERS = ["u1", "u2", "u3"];
const START = Date.parse("2026-11-01T00:00:00Z");
let dbCount = 0;

function freshDb(): Database {
  const db = openDatabase(join(dir, `top-${dbCount++}.db`));
  migrate(db);
  const user = db.query(
    "INSERT INTO users (id, name, role, password_hash, must_change_password, quota_bytes, default_ttl_hours, disabled, created_at) VALUES (?, ?, 'user', 'x', 0, NULL, NULL, 0, ?)",
  );
  for (const id of USERS) user.run(id, id, sqlTime(START));
  return db;
}

interface Seeded {
  id: string;
  user: string;
  access: number;
  second: number;
  size: number;
}

/** Inserts the images as the product does (rows, then the access flush's update), in a random order. */
function seed(db: Database, images: Seeded[]) {
  const blob = db.query(
    "INSERT INTO blobs (sha256, phash, storage_key, mime, size, width, height, ref_count, created_at) VALUES (?, '', ?, 'image/png', ?, 1, 1, 1, ?) RETURNING id",
  );
  const image = db.query("INSERT INTO images (id, blob_id, user_id, file_name, created_at) VALUES (?, ?, ?, ?, ?)");
  const access = db.query("UPDATE images SET access_count = access_count + ? WHERE id = ?");
  db.transaction(() => {
    for (const img of images) {
      const { id: blobId } = blob.get(img.id.padEnd(64, "0"), `img/${img.id}`, img.size, sqlTime(START)) as { id: number };
      image.run(img.id, blobId, img.user, `${img.id}.png`, sqlTime(START + img.second * 1000));
    }
    for (const img of images) if (img.access) access.run(img.access, img.id);
  })();
}

function bruteForce(images: Seeded[], limit: number, user?: string) {
  return images
    .filter((i) => !user || i.user === user)
    .sort((a, b) => b.access - a.access || b.second - a.second)
    .slice(0, limit)
    .map((i) => ({ id: i.id, file_name: `${i.id}.png`, access_count: i.access, size: i.size }));
}

// Distinct upload seconds (ties in both access count and second have no defined order).
const library = fc
  .uniqueArray(
    fc.record({
      second: fc.integer({ min: 0, max: 5000 }),
      user: fc.constantFrom(...USERS),
      // Mostly never accessed, so pages that need the second read are common.
      access: fc.oneof({ weight: 3, arbitrary: fc.constant(0) }, { weight: 1, arbitrary: fc.integer({ min: 1, max: 6 }) }),
      size: fc.integer({ min: 1, max: 1_000_000 }),
    }),
    { selector: (r) => r.second, maxLength: 60 },
  )
  .map((rows) => rows.map((r, n) => ({ ...r, id: `img${String(n).padStart(4, "0")}` })));

test("top images equal a brute-force sort of the whole library, for everyone and per user", () => {
  fc.assert(
    fc.property(library, fc.integer({ min: 1, max: 12 }), (images, limit) => {
      const db = freshDb();
      try {
        seed(db, images);
        expect(topImageRows(db, limit)).toEqual(bruteForce(images, limit));
        for (const user of USERS) expect(topImageRows(db, limit, user)).toEqual(bruteForce(images, limit, user));
      } finally {
        db.close();
      }
    }),
    fuzzParams(2),
  );
});

test("both reads walk an index in order: no table scan, no sort, new uploads write neither top index", () => {
  const db = freshDb();
  try {
    seed(db, [{ id: "a", user: "u1", access: 0, second: 1, size: 10 }]);
    for (const user of [undefined, "u1"]) {
      const sql = topImageSql(user);
      for (const statement of [sql.accessed, sql.unaccessed]) {
        const args = user ? [user, 10] : [10];
        const plan = db
          .query<{ detail: string }, (string | number)[]>(`EXPLAIN QUERY PLAN ${statement}`)
          .all(...args)
          .map((r) => r.detail);
        expect(plan.some((line) => line.includes("TEMP B-TREE"))).toBe(false);
        expect(plan.filter((line) => /^SCAN i\b/.test(line) && !line.includes("USING INDEX"))).toEqual([]);
      }
    }
    // Partial indexes: an upload (access_count 0) adds no entry to either.
    const partial = db
      .query<{ name: string; partial: number }, []>("SELECT name, partial FROM pragma_index_list('images') WHERE name IN ('images_top', 'images_user_top')")
      .all();
    expect(partial.map((p) => p.partial)).toEqual([1, 1]);
  } finally {
    db.close();
  }
});
