import { expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { searchImages } from "../../src/images/repos/image-search";
import { listImages } from "../../src/images/repos/list";
import { bulkLoadImages } from "../helpers/bulk-load";
import { openContext } from "../helpers/context";
import { timeWithLoopPauses } from "../helpers/loop-pauses";

const IMAGES = 200_000;
const WORDS = ["holiday", "cat", "screenshot", "猫咪", "receipt", "avatar", "banner", "IMG", "DSC", "scan"];

/**
 * Image search at scale (issue 10): a short term (no trigram index) and a common trigram term
 * answer in steps with turns of the loop between, exactly what the one-statement list answers.
 */
test("search pages and totals equal the one-statement list, and a search never holds the loop for its whole length", async () => {
  const dir = mkdtempSync(join(tmpdir(), "kura-search-slices-"));
  const ctx = await openContext(dir);
  try {
    const { db } = ctx.app;
    ctx.app.users.insert({
      id: "other",
      name: "other",
      role: "user",
      password_hash: "x",
      must_change_password: 0,
      quota_bytes: null,
      default_ttl_hours: null,
      disabled: 0,
    });
    const blob = Number(
      db
        .query(
          "INSERT INTO blobs (sha256, storage_key, mime, size, width, height, ref_count, created_at) VALUES ('s', 'k', 'image/jpeg', 1, 1, 1, ?, '2025-01-01 00:00:00')",
        )
        .run(IMAGES).lastInsertRowid,
    );
    const insert = db.query("INSERT INTO images (id, blob_id, user_id, file_name, created_at) VALUES (?, ?, ?, ?, ?)");
    bulkLoadImages(db, () => {
      for (let i = 0; i < IMAGES; i++) {
        // Upload times out of rowid order in places (a restored or imported library), with ties.
        const second = i % 1000 === 7 ? i - 5000 : i;
        const at = new Date(Date.UTC(2025, 0, 1) + Math.max(0, second) * 1000).toISOString().slice(0, 19).replace("T", " ");
        insert.run(`s${String(i).padStart(9, "0")}`, blob, i % 3 ? "default" : "other", `${WORDS[i % WORDS.length]}_${i}.jpg`, at);
      }
    });

    // Each step is an index range: the walk newest first, the counts by rowid and through the doclist.
    const plan = (sql: string) =>
      db
        .query<{ detail: string }, []>(`EXPLAIN QUERY PLAN ${sql}`)
        .all()
        .map((r) => r.detail)
        .join(" | ");
    expect(plan("SELECT i.rowid FROM images i WHERE (i.created_at, i.rowid) < ('x', 1) ORDER BY i.created_at DESC, i.rowid DESC LIMIT 2000")).toContain(
      "USING COVERING INDEX images_created (created_at<?)",
    );
    expect(plan("SELECT count(*) FROM images i NOT INDEXED WHERE i.rowid > 1 AND i.rowid <= 2 AND i.file_name LIKE 'x' AND i.user_id = 'u'")).toContain(
      "USING INTEGER PRIMARY KEY (rowid>? AND rowid<?)",
    );

    const cases: [string, string | undefined, number, boolean][] = [
      ["I", undefined, 0, false], // short, common
      ["zz", undefined, 0, false], // short, no match: the whole index walked in steps
      ["_1", "other", 40, false], // short, with an owner, a later page; _ literal
      ["IMG", undefined, 0, false], // long, 20k matches: walked, counted through the doclist
      ["IMG", undefined, 19_980, false], // its last page
      ["jpg", "default", 100, true], // long, every name, owner filter, by cursor
      ["holiday_12", undefined, 0, false], // long, few matches: the one-statement list
      ["猫咪", undefined, 0, false],
    ];
    for (const [term, userId, offset, byCursor] of cases) {
      const filter = { search: term, userId };
      let paging: { pageSize: number; offset: number; cursor?: string } = { pageSize: 20, offset };
      if (byCursor) paging = { pageSize: 20, offset: 0, cursor: listImages(db, filter, { pageSize: offset, offset: 0 }).nextCursor! };
      const expected = listImages(db, filter, paging);
      const { value: got, totalMs: total, longestPauseMs: longest } = await timeWithLoopPauses(() => searchImages(db, filter, paging));
      console.log(
        `search ${term} (${userId ?? "all"}, offset ${offset}): ${got.total} matches, ${total.toFixed(0)} ms, longest loop pause ${longest.toFixed(1)} ms`,
      );
      expect({ term, ids: got.rows.map((r) => r.id), total: got.total, next: got.nextCursor }).toEqual({
        term,
        ids: expected.rows.map((r) => r.id),
        total: expected.total,
        next: expected.nextCursor,
      });
      // A walk of the whole library is done in ~10 ms steps (the one-statement list held the loop for all of it);
      // relative, since a loaded machine adds pauses of its own.
      if (term === "zz") expect(longest).toBeLessThan(total / 3);
    }
  } finally {
    ctx.close();
    rmSync(dir, { recursive: true, force: true });
  }
}, 120_000);
