import { expect, test } from "bun:test";
import { adminSession } from "../helpers/client";
import { form, makeJpeg } from "../helpers/images";
import { KuraServer } from "../helpers/server";

interface Page {
  items: { id: string; file_name: string }[];
  total: number;
  next_cursor: string | null;
}

const NAMES = ["IMG_001.jpg", "img-2.png", "猫.jpg", "50%.jpg", "a_b.jpg", "xY.gif", "photo.jpg", "Ab%_猫.jpg", "z.jpg"];

/**
 * Terms shorter than three characters (no trigram index) are answered by a walk of the list in
 * steps (issue 10): still case-insensitive substrings, % and _ literal, paged by number and by
 * cursor, with the exact total.
 */
test("short search terms match substrings exactly, by page and by cursor, with the exact total", async () => {
  const server = await KuraServer.start();
  try {
    const admin = await adminSession(server);
    for (const [i, name] of NAMES.entries()) await admin.json("POST", "/api/admin/upload", form(await makeJpeg(30 + i, 20, 500 + i), name));
    const all: Page = await admin.json("GET", "/api/admin/images?page_size=100");
    for (const term of ["i", "IM", "%", "_", "猫", "xy", "b%", "q", "G"]) {
      const expected = all.items.filter((i) => i.file_name.toLowerCase().includes(term.toLowerCase())).map((i) => i.id);
      const byPage: string[] = [];
      for (let page = 1; page <= 5; page++) {
        const p: Page = await admin.json("GET", `/api/admin/images?page=${page}&page_size=2&search=${encodeURIComponent(term)}`);
        expect({ term, total: p.total }).toEqual({ term, total: expected.length });
        byPage.push(...p.items.map((i) => i.id));
      }
      expect({ term, ids: byPage }).toEqual({ term, ids: expected });
      const byCursor: string[] = [];
      let cursor = "";
      for (let n = 0; n < 10; n++) {
        const p: Page = await admin.json(
          "GET",
          `/api/admin/images?page_size=2&search=${encodeURIComponent(term)}${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ""}`,
        );
        byCursor.push(...p.items.map((i) => i.id));
        if (!p.next_cursor) break;
        cursor = p.next_cursor;
      }
      expect({ term, ids: byCursor }).toEqual({ term, ids: expected });
    }
  } finally {
    await server.dispose();
  }
}, 120_000);
