/**
 * The review lists and the "exempt only" filter at scale (issue 10): on a real migrated SQLite
 * file with 150k images, 120k of them on the cleanup list, every statement the lists run walks
 * an index in order (no table scan, no temp B-tree sort, no COUNT over the list: `total` is
 * migration 0011's counter), deep pages by number equal a brute-force sort, and the counter
 * equals a count after every kind of change the product makes. The dedup list's exact count, which
 * no counter can follow, is taken in steps of 1,000 pending pairs with the loop turning between.
 */
import type { Database } from "bun:sqlite";
import { afterAll, beforeAll, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { migrate, openDatabase } from "../../src/db/open";
import { listImages } from "../../src/images/repos/list";
import { cleanupCounts, countListableDedup, LISTABLE_DEDUP, listCleanup, listDedupPairs } from "../../src/images/repos/review";

const N = 150_000;
const FLAGGED = 120_000;
const dir = mkdtempSync(join(tmpdir(), "kura-review-"));
let db: Database;

/** Time as the cold rule sees it; many images share a second, so rowid order matters. */
const at = (n: number) => new Date(Date.UTC(2025, 0, 1) + Math.floor(n / 3) * 1000).toISOString().slice(0, 19).replace("T", " ");

beforeAll(() => {
  db = openDatabase(join(dir, "review.db"));
  // Room for the whole file while it is built: with SQLite's default 2 MB the shuffled inserts re-read index pages
  // from the file all along (8 s here, past a minute on CI's busy cores). Only the build is faster: what the tests
  // check is query plans and results.
  db.exec("PRAGMA cache_size = -131072");
  migrate(db);
  db.exec(
    "INSERT INTO users (id, name, role, password_hash, must_change_password, quota_bytes, default_ttl_hours, disabled, created_at) VALUES ('u1', 'u1', 'user', 'x', 0, NULL, NULL, 0, '2025-01-01 00:00:00'), ('u2', 'u2', 'user', 'x', 0, NULL, NULL, 0, '2025-01-01 00:00:00')",
  );
  const blob = db.query(
    "INSERT INTO blobs (sha256, phash, storage_key, mime, size, width, height, ref_count, created_at) VALUES (?, '', ?, 'image/png', 10, 1, 1, 1, '2025-01-01 00:00:00') RETURNING id",
  );
  const image = db.query("INSERT INTO images (id, blob_id, user_id, file_name, created_at, last_public_access_at) VALUES (?, ?, ?, 'f.png', ?, ?)");
  db.transaction(() => {
    const blobs = [1, 2, 3, 4].map((k) => (blob.get(String(k).padEnd(64, "0"), `k${k}`) as { id: number }).id);
    // Images in a shuffled time order (rowid is not the age order), a third accessed later.
    for (let n = 0; n < N; n++) {
      const t = (n * 7919) % N;
      image.run(`i${n}`, blobs[n % 4]!, n % 2 ? "u1" : "u2", at(t), n % 3 === 0 ? at(t + 30) : null);
    }
  })();
  // Flagged as the sweep does (UPDATE in batches), so the counter's update trigger does the counting.
  for (let from = 0; from < FLAGGED; from += 20_000) {
    db.query("UPDATE images SET pending_cleanup = 1 WHERE rowid > ? AND rowid <= ?").run(from, from + 20_000);
  }
  db.exec("UPDATE images SET cleanup_exempt = 1, pending_cleanup = 0 WHERE rowid % 1000 = 7");
  const pair = db.query("INSERT INTO dedup_candidates (blob_a, blob_b, distance, created_at) VALUES (?, ?, ?, '2025-01-01 00:00:00')");
  pair.run(1, 2, 3);
  pair.run(2, 3, 1);
  pair.run(3, 4, 3);
  pair.run(1, 4, 2);
});
afterAll(() => {
  db?.close();
  rmSync(dir, { recursive: true, force: true });
});

/** The database, recording every statement run through `query` with its arguments. */
function recording(): { db: Database; seen: { sql: string; args: unknown[] }[] } {
  const seen: { sql: string; args: unknown[] }[] = [];
  const wrap = (sql: string) => {
    const st = db.query(sql);
    return {
      all: (...args: unknown[]) => (seen.push({ sql, args }), st.all(...(args as []))),
      get: (...args: unknown[]) => (seen.push({ sql, args }), st.get(...(args as []))),
    };
  };
  return { db: new Proxy(db, { get: (t, k) => (k === "query" ? wrap : Reflect.get(t, k)) }) as Database, seen };
}

function planRows(sql: string, args: unknown[]): { parent: number; detail: string }[] {
  return db.query<{ parent: number; detail: string }, []>(`EXPLAIN QUERY PLAN ${sql}`).all(...(args as []));
}

const plan = (sql: string, args: unknown[]) => planRows(sql, args).map((r) => r.detail);

/**
 * Sorts in a plan, except the deferred join's outer one: rows fetched by rowid from the page's
 * IN list (at most a page, page_size ≤ 100) may be put in order; any other sort is of the list.
 */
function sorts(sql: string, args: unknown[]): string[] {
  const rows = planRows(sql, args);
  const top = rows.filter((r) => r.parent === 0).map((r) => r.detail);
  const deferred = top.includes("SEARCH i USING INTEGER PRIMARY KEY (rowid=?)") && top.some((d) => d.startsWith("LIST SUBQUERY"));
  return rows.filter((r) => r.detail.includes("TEMP B-TREE") && !(deferred && r.parent === 0)).map((r) => r.detail);
}

/** Every statement: no sort of the list, no scan of a table without an index, and (when given) the named index used. */
function expectIndexed(seen: { sql: string; args: unknown[] }[], index?: string) {
  expect(seen.length).toBeGreaterThan(0);
  expect(seen.flatMap((s) => sorts(s.sql, s.args))).toEqual([]);
  const lines = seen.flatMap((s) => plan(s.sql, s.args));
  expect(lines.filter((l) => /^SCAN \w+$/.test(l) || (/^SCAN /.test(l) && !l.includes("INDEX")))).toEqual([]);
  if (index) expect(lines.some((l) => l.includes(index))).toBe(true);
  expect(seen.filter((s) => /COUNT\(\*\)[\s\S]*FROM images/i.test(s.sql))).toEqual([]);
}

const AGE_ORDER = "ORDER BY COALESCE(last_public_access_at, created_at), rowid";

test("the counter equals a count, through flag, exempt, delete and insert", () => {
  const count = (where: string) => db.query<{ n: number }, []>(`SELECT COUNT(*) AS n FROM images WHERE ${where}`).get()!.n;
  const check = () => expect(cleanupCounts(db)).toEqual({ listed: count("pending_cleanup = 1 AND cleanup_exempt = 0"), exempt: count("cleanup_exempt = 1") });
  check();
  expect(cleanupCounts(db).listed).toBe(FLAGGED - FLAGGED / 1000);
  db.transaction(() => {
    db.exec("UPDATE images SET cleanup_exempt = 1 WHERE id IN ('i10', 'i11', 'i149999')"); // listed → exempt, unlisted → exempt
    db.exec("UPDATE images SET cleanup_exempt = 0 WHERE id = 'i6'"); // exempt, unflagged: back to neither
    db.exec("DELETE FROM images WHERE id IN ('i12', 'i13', 'i11', 'i149998')");
    db.exec("INSERT INTO images (id, blob_id, user_id, file_name, created_at, pending_cleanup) VALUES ('new1', 1, 'u1', 'n.png', '2020-01-01 00:00:00', 1)");
    db.exec("INSERT INTO images (id, blob_id, user_id, file_name, created_at, cleanup_exempt) VALUES ('new2', 1, 'u1', 'n.png', '2020-01-01 00:00:00', 1)");
    db.exec("UPDATE images SET pending_cleanup = 0 WHERE id = 'i14'");
  })();
  check();
  db.transaction(() => {
    db.exec("DELETE FROM images WHERE id IN ('new1', 'new2')");
    db.exec("INSERT INTO images (id, blob_id, user_id, file_name, created_at, pending_cleanup) VALUES ('i12', 1, 'u1', 'n.png', '2020-01-01 00:00:00', 0)");
  })();
  check();
});

test("cleanup pages near, middle, deep and by cursor equal a brute-force sort, and walk the partial index without sorting", () => {
  const all = db
    .query<{ id: string }, []>(`SELECT id FROM images WHERE pending_cleanup = 1 AND cleanup_exempt = 0 ${AGE_ORDER}`)
    .all()
    .map((r) => r.id);
  const total = all.length;
  expect(cleanupCounts(db).listed).toBe(total);
  const pages = Math.ceil(total / 20);
  for (const page of [1, 2, Math.floor(pages / 2), Math.floor(pages / 2) + 1, pages - 1, pages, pages + 1]) {
    const r = recording();
    const got = listCleanup(r.db, { limit: 20, offset: (page - 1) * 20 });
    expect({ page, ids: got.items.map((i) => i.id) }).toEqual({ page, ids: all.slice((page - 1) * 20, page * 20) });
    expect(got.total).toBe(total);
    expect(got.next_cursor !== null).toBe(page * 20 < total);
    if (page > pages) {
      expect(r.seen.filter((s) => s.sql.includes("FROM images i"))).toEqual([]); // past the end: the counter says so
      continue;
    }
    expectIndexed(r.seen, "images_cleanup_list");
    // A page in the far half walks from the other end: no statement skips more than half the list.
    const offsets = r.seen.filter((s) => s.sql.includes("OFFSET")).map((s) => s.args.at(-1) as number);
    expect(offsets.length).toBe(1);
    expect(offsets[0]!).toBeLessThanOrEqual(total / 2);
    if (got.next_cursor) {
      const c = recording();
      const next = listCleanup(c.db, { limit: 20, offset: 0, cursor: got.next_cursor });
      expect({ page, ids: next.items.map((i) => i.id) }).toEqual({ page, ids: all.slice(page * 20, page * 20 + 20) });
      expectIndexed(c.seen, "images_cleanup_list");
      // The cursor seeks: its plan searches the index from the cursor, it does not scan from the start.
      expect(c.seen.flatMap((s) => plan(s.sql, s.args)).some((l) => /SEARCH i USING INDEX images_cleanup_list \(<expr>>\?\)/.test(l))).toBe(true);
    }
  }
});

test("exempt only (everyone, one owner) reads the exempt partial indexes, and its total is the counter", () => {
  for (const userId of [undefined, "u1"]) {
    const r = recording();
    const page = listImages(r.db, { exempt: true, userId }, { pageSize: 20, offset: 40 });
    const expected = db
      .query<{ id: string }, string[]>(
        `SELECT id FROM images WHERE cleanup_exempt = 1 ${userId ? "AND user_id = ?" : ""} ORDER BY created_at DESC, rowid DESC LIMIT 20 OFFSET 40`,
      )
      .all(...(userId ? [userId] : []))
      .map((x) => x.id);
    expect(page.rows.map((x) => x.id)).toEqual(expected);
    const lines = r.seen.flatMap((s) => plan(s.sql, s.args));
    expect(r.seen.flatMap((s) => sorts(s.sql, s.args))).toEqual([]);
    expect(lines.some((l) => l.includes(userId ? "images_user_exempt" : "images_exempt"))).toBe(true);
    // No statement walks an index of every image (images_created, images_user) for this filter.
    expect(lines.filter((l) => /images_created|images_user\b|images_user \(|^SCAN i$/.test(l))).toEqual([]);
    if (!userId) {
      expect(page.total).toBe(cleanupCounts(db).exempt);
      expect(r.seen.filter((s) => /COUNT\(\*\)/i.test(s.sql))).toEqual([]);
    }
  }
});

test("dedup pages by (distance, id) through dedup_pending_order, with a cursor", async () => {
  const r = recording();
  const first = await listDedupPairs(r.db, { limit: 2, offset: 0 });
  expect(first.items.map((p) => [p.distance, p.id])).toEqual([
    [1, 2],
    [2, 4],
  ]);
  const rest = await listDedupPairs(r.db, { limit: 2, offset: 0, cursor: first.next_cursor! });
  expect(rest.items.map((p) => [p.distance, p.id])).toEqual([
    [3, 1],
    [3, 3],
  ]);
  expect(rest.next_cursor).toBeNull();
  expect(rest.total).toBe(4);
  const pages = r.seen.filter((s) => s.sql.includes("ORDER BY c.distance"));
  const lines = pages.flatMap((s) => plan(s.sql, s.args));
  expect(pages.flatMap((s) => sorts(s.sql, s.args))).toEqual([]);
  expect(lines.some((l) => l.includes("dedup_pending_order"))).toBe(true);
});

test("the listable-pair count is exact and taken in bounded steps along the pending ids", async () => {
  const PAIRS = 25_000;
  const blob = db.query(
    "INSERT INTO blobs (sha256, phash, storage_key, mime, size, width, height, ref_count, pending_delete, created_at) VALUES (?, '', ?, 'image/png', 10, 1, 1, 1, ?, '2025-01-01 00:00:00') RETURNING id",
  );
  const image = db.query("INSERT INTO images (id, blob_id, user_id, file_name, created_at) VALUES (?, ?, 'u1', 'p.png', '2025-01-01 00:00:00')");
  const pair = db.query("INSERT OR IGNORE INTO dedup_candidates (blob_a, blob_b, distance, state, created_at) VALUES (?, ?, ?, ?, '2025-01-01 00:00:00')");
  db.transaction(() => {
    const ids: number[] = [];
    // Every 7th blob waits for deletion, every 11th has no image: their pairs are not listable.
    for (let k = 0; k < 3_000; k++) {
      const id = (blob.get(`p${k}x`.padEnd(64, "0"), `p${k}`, k % 7 === 0 ? 1 : 0) as { id: number }).id;
      if (k % 11) image.run(`p${k}`, id);
      ids.push(id);
    }
    for (let n = 0; n < PAIRS; n++) {
      const a = ids[n % ids.length]!;
      const b = ids[(n * 31 + 1 + Math.floor(n / ids.length)) % ids.length]!;
      if (a !== b) pair.run(Math.min(a, b), Math.max(a, b), n % 9, n % 13 === 0 ? "dismissed" : "pending");
    }
  })();
  const exact = db.query<{ n: number }, []>(`SELECT COUNT(*) AS n ${LISTABLE_DEDUP}`).get()!.n;
  const pending = db.query<{ n: number }, []>("SELECT COUNT(*) AS n FROM dedup_candidates WHERE state = 'pending'").get()!.n;
  expect(exact).toBeGreaterThan(1_000);
  expect(exact).toBeLessThan(pending);
  const r = recording();
  expect(await countListableDedup(r.db)).toBe(exact);
  const steps = r.seen.filter((s) => s.sql.includes("c.id > ? AND c.id <= ?"));
  expect(steps.length).toBe(Math.ceil(pending / 1_000) + (pending % 1_000 === 0 ? 1 : 0));
  for (const s of steps) {
    const [from, to] = s.args as [number, number];
    const inRange = db
      .query<{ n: number }, [number, number]>("SELECT COUNT(*) AS n FROM dedup_candidates WHERE state = 'pending' AND id > ? AND id <= ?")
      .get(from, to)!.n;
    expect(inRange).toBeLessThanOrEqual(1_000);
  }
  expect((await listDedupPairs(db, { limit: 5, offset: 0 })).total).toBe(exact);

  // Page numbers at every depth equal one OFFSET statement, yet no statement skips 1,000 pairs or more.
  const oneStatement = db.query<{ id: number }, [number]>(`SELECT c.id ${LISTABLE_DEDUP} ORDER BY c.distance, c.id LIMIT 20 OFFSET ?`);
  for (const offset of [0, 20, 980, 1_000, 2_500, Math.floor(exact / 2), exact - 20, exact - 7, exact, exact + 20]) {
    const p = recording();
    const got = await listDedupPairs(p.db, { limit: 20, offset });
    expect({ offset, ids: got.items.map((i) => i.id) }).toEqual({ offset, ids: oneStatement.all(offset).map((x) => x.id) });
    expect(got.next_cursor !== null).toBe(offset + 20 < exact);
    const skips = p.seen.filter((s) => /OFFSET \?\s*$/.test(s.sql) && s.sql.includes("c.blob_a")).map((s) => s.args.at(-1) as number);
    const seeks = p.seen.filter((s) => s.sql.includes("ORDER BY distance, id LIMIT 1 OFFSET ?"));
    if (offset >= exact) {
      // Past the end the count alone answers: neither a seek nor the page walks the pairs again.
      expect({ offset, skips: skips.length, seeks: seeks.length }).toEqual({ offset, skips: 0, seeks: 0 });
      continue;
    }
    expect(skips.length).toBe(1);
    expect(skips[0]!).toBeLessThan(1_000);
  }
});
