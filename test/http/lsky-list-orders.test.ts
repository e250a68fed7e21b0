/**
 * GET /api/v1/images through the API: every order, page (first, middle, last, past the end) and
 * keyword gives what a brute-force sort of the uploaded images gives (issue 10 moved the list to
 * index walks in steps: src/images/repos/user-list.ts).
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { makeJpeg } from "../helpers/images";
import { specJson, startClientFixture, type ClientFixture } from "../clients/fixture";

interface Uploaded {
  key: string;
  name: string;
  size: number;
  seq: number;
  createdAt: string;
}

let f: ClientFixture;
const uploaded: Uploaded[] = [];
const NAMES = ["Beach", "cat", "IMG_", "scan", "beach-day"];

beforeAll(async () => {
  f = await startClientFixture();
  const jpegs = await Promise.all(Array.from({ length: 30 }, (_, i) => makeJpeg(8 + (i % 10) * 3, 8 + (i % 7) * 2, 500 + i)));
  // 90 uploads of 30 images: each bytes three times (one blob, equal sizes: the rowid breaks the tie).
  for (let i = 0; i < 90; i++) {
    const fd = new FormData();
    const name = `${NAMES[i % NAMES.length]}${i}.jpg`;
    fd.append("file", new Blob([new Uint8Array(jpegs[(i * 7) % 30]!)]), name);
    const res = await fetch(f.server.url("/api/v1/upload"), { method: "POST", headers: { authorization: `Bearer ${f.token}` }, body: fd });
    const body = await specJson(res, "POST", "/api/v1/upload");
    uploaded.push({ key: body.data.key, name, size: body.data.size, seq: i, createdAt: "" });
  }
  const native = await f.admin.json("GET", "/api/admin/images?page_size=100");
  const createdAt = new Map<string, string>(native.items.map((i: { id: string; created_at: string }) => [i.id, i.created_at]));
  for (const u of uploaded) u.createdAt = createdAt.get(u.key)!;
}, 120_000);
afterAll(async () => {
  await f.dispose();
});

const cmp = (a: string | number, b: string | number) => (a < b ? -1 : a > b ? 1 : 0);
const SORTS: Record<string, (a: Uploaded, b: Uploaded) => number> = {
  newest: (a, b) => cmp(b.createdAt, a.createdAt) || b.seq - a.seq,
  earliest: (a, b) => cmp(a.createdAt, b.createdAt) || a.seq - b.seq,
  utmost: (a, b) => b.size - a.size || b.seq - a.seq,
  least: (a, b) => a.size - b.size || a.seq - b.seq,
};

test("pages, orders and keywords equal a brute-force sort of the uploads", async () => {
  for (const order of ["", "newest", "earliest", "utmost", "least", "bogus"]) {
    for (const keyword of ["", "beach", "IMG", "g_", "a", "nothing-here"]) {
      const all = uploaded.filter((u) => u.name.toLowerCase().includes(keyword.toLowerCase())).sort(SORTS[order] ?? SORTS.newest!);
      const last = Math.max(1, Math.ceil(all.length / 40));
      for (const page of new Set([1, 2, last, last + 1, 99_999])) {
        const res = await fetch(f.server.url(`/api/v1/images?order=${order}&keyword=${encodeURIComponent(keyword)}&page=${page}`), {
          headers: { authorization: `Bearer ${f.token}` },
        });
        const data = (await specJson(res, "GET", "/api/v1/images")).data;
        const expected = all.slice((page - 1) * 40, page * 40);
        expect({ order, keyword, page, keys: data.data.map((i: { key: string }) => i.key), total: data.total, last: data.last_page }).toEqual({
          order,
          keyword,
          page,
          keys: expected.map((u) => u.key),
          total: all.length,
          last,
        });
      }
    }
  }
});

test("another user's list holds none of these, whatever the keyword", async () => {
  await f.admin.json("POST", "/api/admin/users", { name: "lone", password: "lone-password-1", role: "user" }, 201);
  const res = await fetch(f.server.url("/api/v1/tokens"), { method: "POST", body: new URLSearchParams({ name: "lone", password: "lone-password-1" }) });
  const token = (await res.json()).data.token;
  for (const query of ["", "?keyword=jpg", "?keyword=jpg&order=utmost", "?order=least&page=3"]) {
    const list = await fetch(f.server.url(`/api/v1/images${query}`), { headers: { authorization: `Bearer ${token}` } });
    expect({ query, total: (await list.json()).data.total }).toEqual({ query, total: 0 });
  }
});
