import { expect, test } from "bun:test";
import { adminSession, expectError, Session } from "../helpers/client";
import { form, makeJpeg } from "../helpers/images";
import { KuraServer } from "../helpers/server";

interface Page {
  items: { id: string; file_name: string; user_id: string; created_at: string }[];
  total: number;
  next_cursor: string | null;
}

const NAMES = ["Holiday-Beach.jpg", "holiday_snow.jpg", "猫咪照片.jpg", "cat%100.jpg", 'say "hi".jpg', "dog.jpg", "xy.jpg"];

async function walk(s: Session, query: string, pageSize: number): Promise<{ ids: string[]; pages: number; total: number }> {
  const ids: string[] = [];
  let cursor: string | null = "";
  let pages = 0;
  let total = 0;
  while (cursor !== null) {
    const page: Page = await s.json("GET", `/api/admin/images?page_size=${pageSize}${query}${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ""}`);
    ids.push(...page.items.map((i) => i.id));
    total = page.total;
    cursor = page.next_cursor;
    pages++;
    if (pages > 100) throw new Error("cursor never ends");
  }
  return { ids, pages, total };
}

test("keyset pagination walks the same order as page numbers, never skips after a delete, and search uses substrings", async () => {
  const server = await KuraServer.start();
  try {
    const admin = await adminSession(server);
    await admin.json("POST", "/api/admin/users", { name: "dora", password: "password-1" }, 201);
    const dora = new Session(server);
    await dora.login("dora", "password-1");
    // Many uploads share one created_at second: the rowid tie-break must keep the walk exact.
    const jpegs = await Promise.all(Array.from({ length: 31 }, (_, i) => makeJpeg(40 + i, 30, 900 + i)));
    for (let i = 0; i < jpegs.length; i++) {
      const who = i % 4 === 0 ? dora : admin;
      await who.json("POST", "/api/admin/upload", form(jpegs[i]!, `${i}-${NAMES[i % NAMES.length]}`));
    }

    const byPage: string[] = [];
    for (let page = 1; page <= 5; page++) {
      const p: Page = await admin.json("GET", `/api/admin/images?page=${page}&page_size=7`);
      byPage.push(...p.items.map((i) => i.id));
      expect(p.total).toBe(31);
    }
    const walked = await walk(admin, "", 7);
    expect(walked.ids).toEqual(byPage);
    expect(new Set(walked.ids).size).toBe(31);
    expect(walked.pages).toBe(5);
    expect(walked.total).toBe(31);

    // A regular user's walk sees exactly their images, in the same order.
    const doraWalk = await walk(dora, "", 3);
    const doraPage: Page = await dora.json("GET", "/api/admin/images?page_size=100");
    expect(doraWalk.ids).toEqual(doraPage.items.map((i) => i.id));
    expect(doraWalk.ids.length).toBe(8);

    // Deleting a row already seen does not shift the next cursor page (OFFSET would skip one).
    const first: Page = await admin.json("GET", "/api/admin/images?page_size=5");
    await admin.json("DELETE", `/api/admin/images/${first.items[0]!.id}`, undefined, 204);
    const second: Page = await admin.json("GET", `/api/admin/images?page_size=5&cursor=${encodeURIComponent(first.next_cursor!)}`);
    expect(second.items.map((i) => i.id)).toEqual(byPage.slice(5, 10));
    // The cursor wins over page, and a damaged cursor is a 400.
    const ignoredPage: Page = await admin.json("GET", `/api/admin/images?page=3&page_size=5&cursor=${encodeURIComponent(first.next_cursor!)}`);
    expect(ignoredPage.items.map((i) => i.id)).toEqual(byPage.slice(5, 10));
    await expectError(await admin.request("GET", "/api/admin/images?cursor=bm90LWEtY3Vyc29y"), 400);

    // Search: case-insensitive substrings through the trigram index, short terms and quotes and % literally.
    const remaining = byPage.slice(1);
    const all: Page = await admin.json("GET", "/api/admin/images?page_size=100");
    const nameOf = new Map(all.items.map((i) => [i.id, i.file_name]));
    const expected = (pred: (n: string) => boolean) => remaining.filter((id) => pred(nameOf.get(id)!));
    for (const [term, pred] of [
      ["HOLIDAY", (n: string) => n.toLowerCase().includes("holiday")],
      ["day-be", (n: string) => n.includes("day-Be") || n.includes("day-be")],
      ["猫咪照", (n: string) => n.includes("猫咪照")],
      ["t%1", (n: string) => n.includes("t%1")],
      ['"hi"', (n: string) => n.includes('"hi"')],
      ["xy", (n: string) => n.includes("xy")],
      ["nothing-like-this", () => false],
    ] as const) {
      const found = await walk(admin, `&search=${encodeURIComponent(term)}`, 4);
      expect({ term, ids: found.ids }).toEqual({ term, ids: expected(pred) });
      expect(found.total).toBe(found.ids.length);
    }
    // Search combined with the owner filter.
    const doraHoliday = await walk(dora, `&search=holiday`, 2);
    expect(doraHoliday.ids).toEqual(doraWalk.ids.filter((id) => id !== byPage[0] && nameOf.get(id)!.toLowerCase().includes("holiday")));
  } finally {
    await server.dispose();
  }
}, 120_000);
