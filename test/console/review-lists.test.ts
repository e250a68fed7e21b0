// The review tab's two lists in a real headless Chromium (issue 10, audit 9 MED-7, LOW-4): the
// similar-image list pages; the cleanup list pages to its last page, selects a page or the whole
// list (worked through along the cursor in batches of 100) and reports every row it could not
// delete or exempt instead of counting it as done. Each outcome is checked through the API.
import { Database } from "bun:sqlite";
import { afterAll, beforeAll, expect, test } from "bun:test";
import { join } from "node:path";
import type { Browser, Page, Request } from "playwright-core";
import { adminSession, type Session } from "../helpers/client";
import { form, makeJpeg } from "../helpers/images";
import { KuraServer } from "../helpers/server";
import { ADMIN_PASSWORD, DESKTOP, loginAs, openPage, sharedBrowser, watchedPage } from "./harness";

const IMAGES = 130;
const FLAGGED = 125;
let server: KuraServer;
let admin: Session;
let browser: Browser;
let page: Page;
const problems: string[] = [];
/** The cleanup list's order: oldest cold age first, upload order within a second. */
let order: string[] = [];
let pairs = 0;

beforeAll(async () => {
  [server, browser] = await Promise.all([KuraServer.start(), sharedBrowser()]);
  admin = await adminSession(server, ADMIN_PASSWORD);
  await admin.json("PUT", "/api/admin/config", { upload_rate_per_min: 10_000 });
  const ids: string[] = [];
  for (let i = 0; i < IMAGES; i++) ids.push((await admin.json("POST", "/api/admin/upload", form(await makeJpeg(24 + (i % 40), 18, 3000 + i), `c${i}.jpg`))).id);
  const db = new Database(join(server.dataDir, "kura.db"));
  db.exec("PRAGMA busy_timeout = 10000");
  const flag = db.query("UPDATE images SET pending_cleanup = 1, created_at = ? WHERE id = ?");
  for (let i = 0; i < FLAGGED; i++) flag.run(`2001-01-01 00:${String(Math.floor((FLAGGED - i) / 2) % 60).padStart(2, "0")}:00`, ids[i]!);
  order = db
    .query<{ id: string }, []>("SELECT id FROM images WHERE pending_cleanup = 1 ORDER BY created_at, rowid")
    .all()
    .map((r) => r.id);
  const blobs = db
    .query<{ blob_id: number }, []>("SELECT blob_id FROM images ORDER BY rowid LIMIT 23")
    .all()
    .map((r) => r.blob_id);
  const pair = db.query("INSERT INTO dedup_candidates (blob_a, blob_b, distance, created_at) VALUES (?, ?, ?, '2026-01-01 00:00:00')");
  for (let k = 0; k + 1 < blobs.length; k++, pairs++) pair.run(blobs[k]!, blobs[k + 1]!, k % 5);
  db.close();
  page = await watchedPage(browser, server.base, DESKTOP, problems);
  page.on("dialog", (d) => void d.accept());
  await loginAs(page, server.base, "admin", ADMIN_PASSWORD);
  await openPage(page, "review");
}, 120_000);

afterAll(async () => {
  await page?.context().close();
  await server?.dispose();
});

const rowIds = () => page.locator("#cleanup-table tbody tr[data-id]").evaluateAll((rows) => rows.map((r) => (r as HTMLElement).dataset.id));
const toastText = async () => (await page.locator(".toast").last().textContent()) ?? "";

test("the similar-image list pages past its first 20 pairs", async () => {
  await page.locator("#dedup-list .pair").first().waitFor();
  expect(await page.locator("#dedup-count").textContent()).toBe(`${pairs} 组`);
  expect(await page.locator("#dedup-list .pair").count()).toBe(20);
  await page.locator('#dedup-pager button[data-page="2"]').click();
  await page.locator('#dedup-pager button[data-page="2"][aria-current=page]').waitFor();
  await page
    .locator("#dedup-list .pair")
    .nth(pairs - 20)
    .waitFor({ state: "detached" });
  expect(await page.locator("#dedup-list .pair").count()).toBe(pairs - 20);
});

test("the cleanup list's last page, and a failed delete or exempt is reported, not counted", async () => {
  await page.locator("#cleanup-table tbody tr[data-id]").first().waitFor();
  expect(await page.locator("#cleanup-count").textContent()).toBe(`${FLAGGED} 张`);
  const last = Math.ceil(FLAGGED / 20);
  await page.locator(`#cleanup-pager button[data-page="${last}"]`).click();
  await page.locator(`#cleanup-pager button[data-page="${last}"][aria-current=page]`).waitFor();
  expect(await rowIds()).toEqual(order.slice((last - 1) * 20));

  // Any page by number through the pager's field.
  await page.locator("#cleanup-pager input[name=goto_page]").fill("3");
  await page.locator("#cleanup-pager input[name=goto_page]").press("Enter");
  await page.locator('#cleanup-pager button[data-page="3"][aria-current=page]').waitFor();
  expect(await rowIds()).toEqual(order.slice(40, 60));

  // Two rows ticked, one of them deleted elsewhere meanwhile.
  await page.locator('#cleanup-pager button[data-page="1"]').click();
  await page.locator('#cleanup-pager button[data-page="1"][aria-current=page]').waitFor();
  const [gone, kept, alsoGone, exempted] = order;
  for (const id of [gone, kept]) await page.locator(`#cleanup-table tr[data-id="${id}"] input[type=checkbox]`).check();
  await admin.json("DELETE", `/api/admin/images/${gone}`, undefined, 204);
  await page.locator("#cleanup-delete").click();
  await page.locator(`#cleanup-table tr[data-id="${kept}"]`).waitFor({ state: "detached" });
  expect(await toastText()).toBe("已删除 1 张，1 张失败：图片不存在");
  await admin.json("GET", `/api/admin/images/${kept}`, undefined, 404);

  for (const id of [alsoGone, exempted]) await page.locator(`#cleanup-table tr[data-id="${id}"] input[type=checkbox]`).check();
  await admin.json("DELETE", `/api/admin/images/${alsoGone}`, undefined, 204);
  // The selection is exempted in one batch request, not a PATCH per image.
  const writes: string[] = [];
  const onRequest = (r: Request) => {
    if (r.method() !== "GET") writes.push(`${r.method()} ${new URL(r.url()).pathname}`);
  };
  page.on("request", onRequest);
  await page.locator("#cleanup-exempt").click();
  await page.locator(`#cleanup-table tr[data-id="${exempted}"]`).waitFor({ state: "detached" });
  page.off("request", onRequest);
  expect(writes).toEqual(["POST /api/admin/images/batch-exempt"]);
  expect(await toastText()).toBe("已豁免 1 张，1 张失败：图片不存在");
  expect((await admin.json("GET", `/api/admin/images/${exempted}`)).cleanup_exempt).toBe(true);
});

test("select all (every page) deletes the whole list in batches along the cursor", async () => {
  const left = FLAGGED - 4;
  await page
    .locator("#cleanup-count")
    .filter({ hasText: `${left} 张` })
    .waitFor();
  expect(await page.locator("#cleanup-table thead input[type=checkbox]").count()).toBe(1);
  await page.locator("#cleanup-select-page").check();
  expect(await page.locator("#cleanup-selection").textContent()).toBe("已选 20 张");
  await page.locator("#cleanup-select-all").click();
  expect(await page.locator("#cleanup-selection").textContent()).toBe(`已选择待清理的全部 ${left} 张（所有页）`);
  expect(await page.locator("#cleanup-delete").textContent()).toBe(`删除所选（${left}）`);
  const batches: number[] = [];
  page.on("request", (r) => {
    if (r.url().endsWith("/api/admin/images/batch-delete")) batches.push((JSON.parse(r.postData() ?? "{}") as { ids: string[] }).ids.length);
  });
  await page.locator("#cleanup-delete").click();
  await page.locator("#cleanup-table .empty").waitFor();
  expect(await toastText()).toBe(`已删除 ${left} 张`);
  expect(batches).toEqual([100, left - 100]);
  expect((await admin.json("GET", "/api/admin/cleanup")).total).toBe(0);
  // The images not on the list were not touched.
  expect((await admin.json("GET", "/api/admin/images?page_size=1")).total).toBe(IMAGES - FLAGGED + 1);
  expect(problems).toEqual([]);
});
