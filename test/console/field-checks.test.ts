// Console audit of the lifetime fields and the upload counter, in a real headless Chromium against
// a Kura process: 指定小时数 with an empty field is refused, not saved as permanent (item 1); an image
// with a lifetime under an hour shows it to the minute and 保存 of an untouched field sends nothing
// (item 2); URL imports count in x/N and in 复制全部链接 (item 3); the upload lifetime is checked in
// hours before anything is sent (item 6). Each outcome is read back through the HTTP API.
import { afterAll, beforeAll, expect, test } from "bun:test";
import type { Browser, Page, Request } from "playwright-core";
import { adminSession, type Session } from "../helpers/client";
import { form, makeJpeg } from "../helpers/images";
import { KuraServer } from "../helpers/server";
import { ADMIN_PASSWORD, DESKTOP, loginAs, openPage, sharedBrowser, watchedPage } from "./harness";

let server: KuraServer;
let admin: Session;
let browser: Browser;
let page: Page;
/** A loopback web server the URL imports fetch from (KURA_IMPORT_ALLOW lets the server reach it): 404 under /missing. */
let origin: ReturnType<typeof Bun.serve>;
const problems: string[] = [];
/** A check that fails without its fix: quicker than the harness's generous default. */
const SOON = { timeout: 10_000 };

beforeAll(async () => {
  const photo = await makeJpeg(120, 80, 71);
  origin = Bun.serve({
    port: 0,
    hostname: "127.0.0.1",
    fetch: (req) =>
      new URL(req.url).pathname.startsWith("/missing")
        ? new Response("no", { status: 404 })
        : new Response(photo, { headers: { "content-type": "image/jpeg" } }),
  });
  [server, browser] = await Promise.all([KuraServer.start({ env: { KURA_IMPORT_ALLOW: "127.0.0.1/32" } }), sharedBrowser()]);
  admin = await adminSession(server, ADMIN_PASSWORD);
  page = await watchedPage(browser, server.base, DESKTOP, problems);
  page.on("dialog", (d) => void d.accept());
  await loginAs(page, server.base, "admin", ADMIN_PASSWORD);
}, 60_000);

afterAll(async () => {
  await page?.context().close();
  await server?.dispose();
  origin?.stop(true);
});

const imageCount = async (): Promise<number> => (await admin.json("GET", "/api/admin/images?page_size=1")).total;

/** PATCH requests to one image the page sends from now on. */
function patchesTo(id: string): Request[] {
  const seen: Request[] = [];
  page.on("request", (r) => {
    if (r.method() === "PATCH" && r.url().endsWith(`/api/admin/images/${id}`)) seen.push(r);
  });
  return seen;
}

test("users: 指定小时数 with an empty or zero field is refused on the field; whole hours are saved", async () => {
  await admin.json("POST", "/api/admin/users", { name: "bob", password: "bob-password-1" }, 201);
  const bob = async () => (await admin.json("GET", "/api/admin/users")).items.find((u: { name: string }) => u.name === "bob");
  await openPage(page, "users");
  await page.locator("#user-table tr[data-name=bob]").getByRole("button", { name: "编辑" }).click();
  const dialog = page.locator("dialog", { has: page.locator("#user-edit-form") });
  await dialog.locator("select[name=edit_ttl_mode]").selectOption("hours");
  const hours = dialog.locator("input[name=edit_ttl_hours]");
  const error = dialog.locator("#edit-ttl-error");
  for (const typed of ["", "0"]) {
    await hours.fill(typed);
    await dialog.getByRole("button", { name: "保存" }).click();
    await error.filter({ hasText: "请填写 1 到 876000 之间的整数小时数" }).waitFor(SOON);
    expect(await dialog.isVisible()).toBe(true);
  }
  // Nothing was sent: bob still follows the global default (an empty field used to save 0, permanent).
  expect((await bob()).default_ttl_hours).toBeNull();
  await hours.fill("12");
  expect(await error.textContent()).toBe("");
  await dialog.getByRole("button", { name: "保存" }).click();
  await dialog.waitFor({ state: "detached" });
  expect((await bob()).default_ttl_hours).toBe(12);
  await page.locator("#user-table tr[data-name=bob]", { hasText: "12 小时" }).waitFor();
});

test("image detail: a 20-minute lifetime shows to the minute; 保存 of the untouched field keeps it expiring", async () => {
  const { id } = await admin.json("POST", "/api/admin/upload", form(await makeJpeg(60, 40, 72), "short-lived.jpg", { ttl: "1200" }));
  const patches = patchesTo(id);
  await openPage(page, "images");
  await page.locator(`#image-grid .tile[data-id="${id}"] button.thumb`).click();
  const detail = page.locator("#image-detail");
  const facts = detail.locator(".facts");
  await facts.waitFor();
  const expiry = await facts.textContent();
  expect(expiry).toContain("有效期 20 分钟");
  expect(expiry).toMatch(/剩余 (19|20) 分钟/);
  expect(expiry).not.toContain("0 小时");
  const ttl = detail.locator("input[name=ttl_hours]");
  expect(await ttl.inputValue()).toBe("");
  expect(await ttl.getAttribute("placeholder")).toBe("当前 20 分钟");
  await detail.locator("#ttl-form").getByRole("button", { name: "保存" }).click();
  await detail.locator("#ttl-error", { hasText: "请先填写新的有效期" }).waitFor(SOON);
  const still = await admin.json("GET", `/api/admin/images/${id}`);
  expect([still.ttl_seconds, still.expire_at === null]).toEqual([1200, false]);
  expect(patches).toHaveLength(0);

  // A typed lifetime is sent; saving it again untouched is not (it would restart the clock).
  await ttl.fill("2");
  await detail.locator("#ttl-form").getByRole("button", { name: "保存" }).click();
  await facts.filter({ hasText: "有效期 2 小时" }).waitFor();
  expect((await admin.json("GET", `/api/admin/images/${id}`)).ttl_seconds).toBe(7200);
  expect(await ttl.inputValue()).toBe("2");
  await detail.locator("#ttl-form").getByRole("button", { name: "保存" }).click();
  await detail.locator("#ttl-error", { hasText: "有效期没有改动" }).waitFor(SOON);
  expect(patches).toHaveLength(1);
  await detail.getByRole("button", { name: "关闭" }).click();
});

test("upload: a lifetime outside 0–876000 hours is refused in hours before sending; fractions of an hour go up", async () => {
  await openPage(page, "upload");
  const before = await imageCount();
  const ttl = page.locator("input[name=ttl_hours]");
  const error = page.locator("#upload-ttl-error");
  const results = page.locator("#upload-results .result");
  const rows = await results.count();
  for (const typed of ["-1", "876001"]) {
    await ttl.fill(typed);
    await page.locator("#file-input").setInputFiles({ name: `bad-ttl${typed}.jpg`, mimeType: "image/jpeg", buffer: await makeJpeg(40, 30, 73) });
    await error.filter({ hasText: "请填写 0 到 876000 之间的小时数（0 为永久）" }).waitFor(SOON);
    const importForm = page.locator("#import-form");
    await importForm.locator("input[name=import_url]").fill(`${origin.url.origin}/bad-ttl.jpg`);
    await importForm.locator("button[type=submit]").click();
    await page.waitForTimeout(300);
    expect(await results.count()).toBe(rows);
    expect(await page.locator("#upload-results").textContent()).not.toContain("3153600000");
  }
  expect(await imageCount()).toBe(before);
  await ttl.fill("0.5");
  await page.locator("#file-input").setInputFiles({ name: "half-hour.jpg", mimeType: "image/jpeg", buffer: await makeJpeg(40, 30, 74) });
  const link = page.locator("#upload-results .result.ok", { hasText: "half-hour.jpg" }).locator(".uploaded-url");
  await link.waitFor();
  expect(await error.textContent()).toBe("");
  const id = (await link.textContent())!.split("/").pop()!;
  expect((await admin.json("GET", `/api/admin/images/${id}`)).ttl_seconds).toBe(1800);
  await ttl.fill("");
  await page.locator("#import-form input[name=import_url]").fill("");
});

test("upload: URL imports count in x/N, failures included, and their links are in 复制全部链接", async () => {
  // The upload page is kept for the session: start from a fresh one.
  await page.reload();
  await page.locator("nav a.active").waitFor({ state: "attached" });
  await openPage(page, "upload");
  await page.locator("#file-input").setInputFiles({ name: "from-disk.jpg", mimeType: "image/jpeg", buffer: await makeJpeg(40, 30, 75) });
  await page.locator("#upload-results .result.ok", { hasText: "from-disk.jpg" }).waitFor();
  const importForm = page.locator("#import-form");
  await importForm.locator("input[name=import_url]").fill(`${origin.url.origin}/from-web.jpg`);
  await importForm.locator("button[type=submit]").click();
  await page.locator("#upload-results .result.ok", { hasText: "from-web.jpg" }).waitFor();
  await importForm.locator("input[name=import_url]").fill(`${origin.url.origin}/missing/gone.jpg`);
  await importForm.locator("button[type=submit]").click();
  await page.locator("#upload-results .result.failed", { hasText: "gone.jpg" }).waitFor();
  await page.locator("#upload-tally", { hasText: "已完成 2 / 3，失败 1" }).waitFor(SOON);

  // What 复制全部链接 puts on the clipboard (captured: headless Chromium has no clipboard to read).
  await page.evaluate(() => {
    const w = window as unknown as { copied: string[] };
    w.copied = [];
    Object.defineProperty(navigator, "clipboard", { configurable: true, value: { writeText: async (t: string) => void w.copied.push(t) } });
  });
  await page.locator("select[name=copy_all_format]").selectOption("URL");
  await page.locator("#copy-all").click();
  await page.waitForFunction(() => (window as unknown as { copied: string[] }).copied.length === 1);
  const copied = (await page.evaluate(() => (window as unknown as { copied: string[] }).copied[0]!)).split("\n");
  const shown = await page.locator("#upload-results .result.ok .uploaded-url").allTextContents();
  expect(copied.sort()).toEqual(shown.sort());
  expect(copied).toHaveLength(2);
  expect(problems).toEqual([]);
});
