/**
 * A delimiter listing (`rclone lsf`: v1 `delimiter=/&max-keys=1000`) reads O(prefixes + keys) rows,
 * not a batch per folder. Audit 10 (HIGH-1): each CommonPrefix re-read 256 rows to use one, so 500
 * folders held the loop 1-4.7 s at a million images. Counted structurally (rows each statement may
 * read, its LIMIT, and the index plan that makes a probe a seek), not timed: the machine is shared.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import type { Database } from "bun:sqlite";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { AppContext } from "../../src/context";
import { listKeys } from "../../src/s3/ops/list";
import { openContext } from "../helpers/context";

const FOLDERS = 500;
const PER_FOLDER = 20;

let dir: string;
let ctx: Awaited<ReturnType<typeof openContext>>;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "kura-s3-probes-"));
  ctx = await openContext(dir);
  const { db } = ctx.app;
  const blob = Number(
    db
      .query(
        "INSERT INTO blobs (sha256, storage_key, mime, size, width, height, ref_count, created_at, md5) VALUES ('s', 'k', 'image/png', 1, 1, 1, 1, '2025-01-01 00:00:00', '0123456789abcdef0123456789abcdef')",
      )
      .run().lastInsertRowid,
  );
  const image = db.query(
    "INSERT INTO images (id, blob_id, user_id, file_name, object_key, created_at) VALUES (?, ?, 'default', 'x.png', ?, '2025-01-01 00:00:00')",
  );
  const folder = db.query("INSERT INTO s3_folder_markers (user_id, object_key, created_at) VALUES ('default', ?, '2025-01-01 00:00:00')");
  db.transaction(() => {
    for (let f = 0; f < FOLDERS; f++) {
      const d = `d${String(f).padStart(3, "0")}`;
      for (let k = 0; k < PER_FOLDER; k++) image.run(`${d}-${k}`, blob, `${d}/${String(k).padStart(2, "0")}.png`);
      image.run(`${d}-flat`, blob, `flat-${d}.png`);
      if (f % 10 === 0) folder.run(`${d}/`);
    }
  })();
});
afterAll(() => {
  ctx.close();
  rmSync(dir, { recursive: true, force: true });
});

/** The app with its database wrapped: every `.all()` counted, with the LIMIT it was given (the listing's last parameter). */
function counting(app: AppContext) {
  const stats = { statements: 0, rowsAsked: 0, rowsReturned: 0, sql: new Set<string>(), params: [] as unknown[][] };
  const db = new Proxy(app.db, {
    get(target, prop) {
      if (prop === "query") {
        return (sql: string) => {
          const statement = target.query(sql);
          return new Proxy(statement, {
            get(s, p) {
              if (p === "all") {
                return (...args: unknown[]) => {
                  const rows = s.all(...(args as never[]));
                  stats.statements++;
                  stats.rowsAsked += Number(args.at(-1));
                  stats.rowsReturned += rows.length;
                  stats.sql.add(sql);
                  stats.params.push(args);
                  return rows;
                };
              }
              const v = Reflect.get(s, p);
              return typeof v === "function" ? v.bind(s) : v;
            },
          });
        };
      }
      const v = Reflect.get(target, prop);
      return typeof v === "function" ? v.bind(target) : v;
    },
  }) as Database;
  return { app: { ...app, db } as AppContext, stats };
}

test("rclone lsf's listing of 500 folders and 500 keys asks for about one row per entry, and each probe is an index seek", async () => {
  const { app, stats } = counting(ctx.app);
  const page = await listKeys(app, "default", { prefix: "", delimiter: "/", from: "", maxKeys: 1000 });
  expect(page.prefixes.length).toBe(FOLDERS);
  expect(page.contents.length).toBe(FOLDERS);
  expect(page.truncated).toBe(false);
  console.log(`delimiter page: ${stats.statements} statements, ${stats.rowsAsked} rows asked, ${stats.rowsReturned} returned`);
  const entries = page.prefixes.length + page.contents.length;
  // One probe per folder (LIMIT 1) plus the keys' batches: before, 500 x 256 = 128,000 rows asked.
  expect(stats.rowsAsked).toBeLessThanOrEqual(3 * entries);
  expect(stats.statements).toBeLessThanOrEqual(entries + 10);
  expect(stats.rowsReturned).toBeLessThanOrEqual(2 * entries);

  // Each probe seeks both tables by (user_id, object_key) and reads no more than its LIMIT: no scan, no sort of a table.
  expect(stats.sql.size).toBe(1);
  const [sql] = [...stats.sql];
  const plan = ctx.app.db
    .query<{ detail: string }, never[]>(`EXPLAIN QUERY PLAN ${sql}`)
    .all(...(stats.params[1] as never[]))
    .map((r) => r.detail);
  expect(
    plan.some((d) => /SEARCH i USING INDEX images_object_key \(user_id=\? AND object_key>\?\)/.test(d)),
    plan.join("\n"),
  ).toBe(true);
  expect(
    plan.some((d) => /SEARCH f USING PRIMARY KEY \(user_id=\? AND object_key>\?\)/.test(d)),
    plan.join("\n"),
  ).toBe(true);
  expect(
    plan.some((d) => /^SCAN (i|f|b)\b/.test(d)),
    plan.join("\n"),
  ).toBe(false);
});

test("a small page asks for no more rows than it can return: max-keys 3 over the folders", async () => {
  const { app, stats } = counting(ctx.app);
  const page = await listKeys(app, "default", { prefix: "", delimiter: "/", from: "", maxKeys: 3 });
  expect(page.prefixes).toEqual(["d000/", "d001/", "d002/"]);
  expect(page.truncated).toBe(true);
  expect(stats.rowsAsked).toBeLessThanOrEqual(4);
});

test("a flat page (no delimiter) reads its keys in batches, max-keys + 1 rows at most", async () => {
  const { app, stats } = counting(ctx.app);
  const page = await listKeys(app, "default", { prefix: "d1", delimiter: "", from: "d1", maxKeys: 1000 });
  expect(page.contents.length).toBe(1000);
  expect(page.truncated).toBe(true);
  expect(stats.rowsAsked).toBe(1001);
});
