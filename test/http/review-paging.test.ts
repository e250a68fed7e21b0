/**
 * The review lists and the "exempt only" image filter page the same way at any depth (issue
 * 10): a cursor walk, page numbers in the near half and in the far half (walked from the other
 * end) all give one order, `total` comes from the counter the triggers keep, and a row decided
 * while paging does not shift the next cursor page.
 */
import { Database } from "bun:sqlite";
import { expect, test } from "bun:test";
import { join } from "node:path";
import { adminSession, expectError, Session } from "../helpers/client";
import { form, makeJpeg } from "../helpers/images";
import { KuraServer } from "../helpers/server";

interface Listing {
  items: { id: string }[];
  total: number;
  next_cursor: string | null;
}

async function walk(s: Session, path: string, pageSize: number): Promise<{ ids: string[]; totals: number[] }> {
  const ids: string[] = [];
  const totals: number[] = [];
  let cursor: string | null = "";
  for (let n = 0; cursor !== null; n++) {
    if (n > 100) throw new Error("cursor never ends");
    const sep = path.includes("?") ? "&" : "?";
    const page: Listing = await s.json("GET", `${path}${sep}page_size=${pageSize}${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ""}`);
    ids.push(...page.items.map((i) => i.id));
    totals.push(page.total);
    cursor = page.next_cursor;
  }
  return { ids, totals };
}

async function byPages(s: Session, path: string, pageSize: number, pages: number): Promise<{ ids: string[]; cursors: (string | null)[] }> {
  const ids: string[] = [];
  const cursors: (string | null)[] = [];
  const sep = path.includes("?") ? "&" : "?";
  for (let page = 1; page <= pages; page++) {
    const p: Listing = await s.json("GET", `${path}${sep}page=${page}&page_size=${pageSize}`);
    ids.push(...p.items.map((i) => i.id));
    cursors.push(p.next_cursor);
  }
  return { ids, cursors };
}

test("cleanup and dedup lists: cursor walk = page numbers at every depth; the exempt filter and its total", async () => {
  const server = await KuraServer.start();
  try {
    const admin = await adminSession(server);
    const doraId: string = (await admin.json("POST", "/api/admin/users", { name: "dora", password: "password-1" }, 201)).id;
    const dora = new Session(server);
    await dora.login("dora", "password-1");
    const ids: string[] = [];
    for (let i = 0; i < 17; i++) {
      const who = i % 5 === 0 ? dora : admin;
      ids.push((await who.json("POST", "/api/admin/upload", form(await makeJpeg(30 + i, 20, 500 + i), `r${i}.jpg`))).id);
    }

    // Flag 15 of them with cold ages that tie in threes (rowid, i.e. upload order, breaks a tie);
    // some never accessed (their upload time counts). ids[15] and ids[16] stay off the list.
    const rw = new Database(join(server.dataDir, "kura.db"));
    const flag = rw.query("UPDATE images SET pending_cleanup = 1, last_public_access_at = ?, created_at = ? WHERE id = ?");
    const ageOf = (i: number) => `2001-01-0${1 + Math.floor((14 - i) / 3)} 00:00:00`;
    for (let i = 0; i < 15; i++) {
      if (i % 2) flag.run(ageOf(i), "2000-01-01 00:00:00", ids[i]!);
      else flag.run(null, ageOf(i), ids[i]!);
    }
    const rowid = new Map(
      rw
        .query<{ id: string; r: number }, []>("SELECT id, rowid AS r FROM images")
        .all()
        .map((x) => [x.id, x.r]),
    );
    const expected = ids
      .slice(0, 15)
      .map((id, i) => ({ id, age: ageOf(i), r: rowid.get(id)! }))
      .sort((a, b) => a.age.localeCompare(b.age) || a.r - b.r)
      .map((x) => x.id);

    // 15 rows in pages of 4: pages 1-2 walk forwards, pages 3-4 from the end (the last one short).
    const paged = await byPages(admin, "/api/admin/cleanup", 4, 5);
    expect(paged.ids).toEqual(expected);
    expect(paged.cursors.map((c) => c !== null)).toEqual([true, true, true, false, false]);
    const walked = await walk(admin, "/api/admin/cleanup", 4);
    expect(walked.ids).toEqual(expected);
    expect(new Set(walked.totals)).toEqual(new Set([15]));
    // A far-half page's cursor continues where it ends.
    const third: Listing = await admin.json("GET", "/api/admin/cleanup?page=3&page_size=4");
    const fourth: Listing = await admin.json("GET", `/api/admin/cleanup?page_size=4&cursor=${encodeURIComponent(third.next_cursor!)}`);
    expect(fourth.items.map((i) => i.id)).toEqual(expected.slice(12));
    expect(fourth.next_cursor).toBeNull();

    // Deciding rows already seen (exempt one, delete one) does not shift the next cursor page; total follows.
    const first: Listing = await admin.json("GET", "/api/admin/cleanup?page_size=5");
    await admin.json("PATCH", `/api/admin/images/${first.items[0]!.id}`, { cleanup_exempt: true });
    await admin.json("DELETE", `/api/admin/images/${first.items[1]!.id}`, undefined, 204);
    const second: Listing = await admin.json("GET", `/api/admin/cleanup?page_size=5&cursor=${encodeURIComponent(first.next_cursor!)}`);
    expect(second.items.map((i) => i.id)).toEqual(expected.slice(5, 10));
    expect(second.total).toBe(13);
    expect((await admin.json("GET", "/api/admin/dashboard")).pending_cleanup).toBe(13);
    // The cursor wins over page; a damaged cursor or one of another list's shape is a 400.
    const again: Listing = await admin.json("GET", `/api/admin/cleanup?page=3&page_size=5&cursor=${encodeURIComponent(first.next_cursor!)}`);
    expect(again.items.map((i) => i.id)).toEqual(expected.slice(5, 10));
    await expectError(await admin.request("GET", "/api/admin/cleanup?cursor=bm90LWEtY3Vyc29y"), 400);
    await expectError(await admin.request("GET", `/api/admin/cleanup?cursor=${Buffer.from("[3,7]").toString("base64url")}`), 400);
    await expectError(await admin.request("GET", `/api/admin/dedup?cursor=${Buffer.from('["x",7]').toString("base64url")}`), 400);

    // Exempt only: exactly the exempt images, newest first, by page and by cursor; total from the counter.
    for (const i of [3, 6, 10, 15]) await admin.json("PATCH", `/api/admin/images/${ids[i]}`, { cleanup_exempt: true });
    rw.query("UPDATE images SET created_at = '2003-01-01 00:00:00' WHERE id = ?").run(ids[6]!);
    const exempt = [ids[6], ids[15], first.items[0]!.id, ids[10], ids[3]];
    const exemptOrder = rw
      .query<{ id: string }, []>("SELECT id FROM images WHERE cleanup_exempt = 1 ORDER BY created_at DESC, rowid DESC")
      .all()
      .map((x) => x.id);
    expect(new Set(exemptOrder)).toEqual(new Set(exempt));
    const ex = await walk(admin, "/api/admin/images?exempt=1", 2);
    expect(ex.ids).toEqual(exemptOrder);
    expect(new Set(ex.totals)).toEqual(new Set([5]));
    expect((await byPages(admin, "/api/admin/images?exempt=1", 2, 3)).ids).toEqual(exemptOrder);
    const doraExempt = exemptOrder.filter((id) => ids.indexOf(id) % 5 === 0);
    const de = await walk(admin, `/api/admin/images?exempt=1&user_id=${doraId}`, 1);
    expect(de.ids).toEqual(doraExempt);
    expect(new Set(de.totals)).toEqual(new Set([doraExempt.length]));
    await admin.json("PATCH", `/api/admin/images/${ids[3]}`, { cleanup_exempt: false });
    expect(((await admin.json("GET", "/api/admin/images?exempt=1")) as Listing).total).toBe(4);
    await admin.json("DELETE", `/api/admin/images/${ids[15]}`, undefined, 204);
    expect(((await admin.json("GET", "/api/admin/images?exempt=1")) as Listing).total).toBe(3);

    // Dedup pairs between the remaining images' blobs, distances tied in pairs (id breaks a tie).
    const blobs = rw
      .query<{ blob_id: number }, []>("SELECT DISTINCT blob_id FROM images ORDER BY blob_id")
      .all()
      .map((x) => x.blob_id);
    const pair = rw.query("INSERT INTO dedup_candidates (blob_a, blob_b, distance, created_at) VALUES (?, ?, ?, '2026-01-01 00:00:00') RETURNING id");
    const pairs: { id: number; d: number }[] = [];
    for (let k = 0; k + 1 < blobs.length; k++) {
      const d = 9 - Math.floor(k / 2);
      pairs.push({ id: (pair.get(blobs[k]!, blobs[k + 1]!, d) as { id: number }).id, d });
    }
    rw.close();
    const dedupOrder = pairs.sort((a, b) => a.d - b.d || a.id - b.id).map((p) => String(p.id));
    const dw = await walk(admin, "/api/admin/dedup", 3);
    expect(dw.ids.map(String)).toEqual(dedupOrder);
    expect(new Set(dw.totals)).toEqual(new Set([dedupOrder.length]));
    expect((await byPages(admin, "/api/admin/dedup", 3, Math.ceil(dedupOrder.length / 3))).ids.map(String)).toEqual(dedupOrder);
  } finally {
    await server.dispose();
  }
}, 120_000);
