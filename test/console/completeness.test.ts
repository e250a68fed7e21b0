// Audit 9's "does the console show everything the server can do" findings, each in a real headless
// Chromium against a seeded Kura process: every upload token reachable by page (MED-4), another
// user's tokens listed and revoked by an admin (MED-5), the real CDN purge state (MED-6), every
// runtime setting with its range (LOW-5, LOW-6), the login wait (LOW-13), "go to page" in the
// images list (LOW-1) and resolved alerts found beyond the first page of all alerts (LOW-3).
import { Database } from "bun:sqlite";
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { join } from "node:path";
import type { Browser, Page } from "playwright-core";
import { Session } from "../helpers/client";
import { form, makeJpeg } from "../helpers/images";
import { ADMIN_PASSWORD, DESKTOP, loginAs, openPage, seedServer, sharedBrowser, type Seeded, watchedPage } from "./harness";

const TOKENS = 130;
let seeded: Seeded;
let browser: Browser;
let page: Page;
let base = "";
const problems: string[] = [];
let aliceToken = 0;

beforeAll(async () => {
  [seeded, browser] = await Promise.all([seedServer(30), sharedBrowser()]);
  base = seeded.server.base;
  for (let i = 0; i < TOKENS; i++) await seeded.api.json("POST", "/api/admin/tokens", { name: `bulk-token-${String(i).padStart(3, "0")}` }, 201);
  const alice = new Session(seeded.server);
  expect((await alice.login("alice", "alice-password-1")).status).toBe(200);
  aliceToken = (await alice.json("POST", "/api/admin/tokens", { name: "alice-leaked" }, 201)).id;
  // 60 resolved alerts, then 55 newer open ones: the first page of all alerts holds no resolved one.
  const db = new Database(join(seeded.server.dataDir, "kura.db"));
  db.exec("PRAGMA busy_timeout = 10000");
  const insert = db.query(
    "INSERT INTO alerts (kind, target, message, opened_at, resolved_at, open_delivered, resolved_delivered) VALUES (?, ?, ?, ?, ?, 1, 1)",
  );
  for (let i = 0; i < 60; i++) insert.run("channel_unhealthy", `old-${i}`, `旧告警 ${i}`, "2025-01-01 00:00:00", "2025-01-02 00:00:00");
  for (let i = 0; i < 55; i++) insert.run("channel_unhealthy", `gone-${i}`, `未解除 ${i}`, "2026-01-01 00:00:00", "");
  db.close();
  page = await watchedPage(browser, base, DESKTOP, problems);
  page.on("dialog", (d) => void d.accept());
  await loginAs(page, base, "admin", ADMIN_PASSWORD);
}, 120_000);

afterAll(async () => {
  await page?.context().close();
  await seeded?.dispose();
});

describe("the console shows what the server can do", () => {
  test("#tokens: pages through every token with its total; the oldest can be revoked and deleted", async () => {
    await openPage(page, "tokens");
    await page.locator("#token-count", { hasText: `共 ${TOKENS} 个` }).waitFor();
    await page.locator("#token-pager button[data-page='3']").click();
    const oldest = page.locator("#token-table tr[data-name=bulk-token-000]");
    await oldest.waitFor();
    await oldest.getByRole("button", { name: "吊销" }).click();
    await oldest.getByRole("button", { name: "删除" }).click();
    await page.locator("#token-count", { hasText: `共 ${TOKENS - 1} 个` }).waitFor();
    const listed = await seeded.api.json("GET", "/api/admin/tokens?page_size=100&page=2");
    expect(listed.items.map((t: { name: string }) => t.name)).not.toContain("bulk-token-000");
  });

  test("#tokens: an admin lists another user's tokens (from the users page too) and revokes one", async () => {
    await openPage(page, "users");
    await page.locator("tr", { hasText: "alice" }).getByRole("link", { name: "查看令牌" }).click();
    const row = page.locator("#token-table tr[data-name=alice-leaked]");
    await row.waitFor();
    expect(await page.locator("#token-other-user").isVisible()).toBe(true);
    expect(await page.locator("#token-form").isVisible()).toBe(false);
    // Rotation and S3 credentials are the owner's own: not offered.
    expect(await row.getByRole("button", { name: "轮换" }).count()).toBe(0);
    await row.getByRole("button", { name: "吊销" }).click();
    await row.locator(".badge", { hasText: "已吊销" }).waitFor();
    const alice = (await seeded.api.json("GET", "/api/admin/users")).items.find((u: { name: string }) => u.name === "alice");
    const theirs = await seeded.api.json("GET", `/api/admin/tokens?user_id=${alice.id}`);
    expect(theirs.items.find((t: { id: number }) => t.id === aliceToken).revoked_at).toBeTruthy();
    // Back to one's own tokens through the selector.
    await page.locator("select[name=token_user]").selectOption({ index: 0 });
    await page.locator("#token-count", { hasText: `共 ${TOKENS - 1} 个` }).waitFor();
    expect(await page.locator("#token-form").isVisible()).toBe(true);
  });

  test("#settings: CDN purge state is stated, with what it lacks; every key is a field with its range", async () => {
    await openPage(page, "settings");
    const state = page.locator("#cdn-purge-state");
    await state.waitFor();
    expect(await state.textContent()).toContain("未开启（缺少站点地址、CDN Zone ID、CDN API 令牌）");
    await page.locator("#set-cdn_provider_zone_id").fill("zone123");
    await page.locator("#set-cdn_provider_api_token").fill("cf-token-value");
    await page.locator("#settings-form button[type=submit]").click();
    await page.getByText("已保存 2 项").waitFor();
    await page.locator("#cdn-purge-state", { hasText: "未开启（缺少站点地址）" }).waitFor();
    expect((await seeded.api.json("GET", "/api/admin/config/full")).derived.cdn_purge_enabled).toBe(false);
    await page.locator("#set-base_url").fill("https://img.example.com");
    await page.locator("#settings-form button[type=submit]").click();
    await page.locator("#cdn-purge-state", { hasText: "已开启" }).waitFor();
    expect((await seeded.api.json("GET", "/api/admin/config/full")).derived.cdn_purge_enabled).toBe(true);
    // The other derived value the server reports is shown too.
    expect(await page.locator(".facts").textContent()).toContain("渠道对账间隔86400 秒");

    const s3 = page.locator("#settings-form .setting[data-key=s3_multipart_expiry_hours]");
    expect(await s3.locator("input").inputValue()).toBe("24");
    expect(await s3.textContent()).toContain("允许 1–876000");
    const mb = page.locator("#settings-form .setting[data-key=max_upload_mb]");
    expect(await mb.textContent()).toContain("允许 1–10240");
    await mb.locator("input").fill("999999");
    await page.locator("#settings-form button[type=submit]").click();
    await mb.locator(".field-error", { hasText: "允许 1–10240" }).waitFor();
    // A key with a digit in it is matched to its field too.
    await s3.locator("input").fill("0");
    await mb.locator("input").fill("20");
    await page.locator("#settings-form button[type=submit]").click();
    await s3.locator(".field-error", { hasText: "允许 1–876000" }).waitFor();
    await s3.locator("input").fill("48");
    await page.locator("#settings-form button[type=submit]").click();
    await s3.locator(".field-error", { hasText: "允许" }).waitFor({ state: "detached" });
    await page.locator("#settings-dirty").waitFor({ state: "hidden" });
    expect((await seeded.api.json("GET", "/api/admin/config/full")).settings.s3_multipart_expiry_hours).toBe(48);
  });

  test("#images: a page number typed into the pager opens that page; cursor 加载更多 still appends", async () => {
    await openPage(page, "images");
    await page.locator("#image-count", { hasText: "第 1 / 2 页" }).waitFor();
    const jump = page.locator("#image-pager input[name=goto_page]");
    await jump.fill("2");
    await jump.press("Enter");
    await page.getByText("第 2 / 2 页").waitFor();
    expect(await page.locator("#image-pager button[aria-current=page]").textContent()).toBe("2");
    // Out of range: the browser's validity message, no request, the page stays.
    await jump.fill("9");
    await jump.press("Enter");
    expect(await jump.evaluate((el) => (el as HTMLInputElement).validationMessage)).toContain("1 到 2");
    expect(await page.locator("#image-pager button[aria-current=page]").textContent()).toBe("2");
    await jump.fill("1");
    await jump.press("Enter");
    await page.getByText("第 1 / 2 页").waitFor();
    await page.locator("#image-more").click();
    await page.getByText("第 1–2 / 2 页").waitFor();
  });

  test("#images: the source-token filter offers every one of the owner's tokens, not the newest 100", async () => {
    await openPage(page, "images");
    await page.locator("select[name=owner]").selectOption({ label: "admin" });
    // "全部来源" and the admin's tokens (one was deleted above).
    await page.waitForFunction((n) => document.querySelectorAll("select[name=token] option").length === n, TOKENS);
    expect(await page.locator("select[name=token] option", { hasText: "bulk-token-001" }).count()).toBe(1);
  });

  test("#audit: 已解除 finds resolved alerts that lie beyond the first page of all alerts", async () => {
    await openPage(page, "audit");
    await page.locator("select[name=alert_status]").selectOption("resolved");
    await page.locator("#alert-history tr[data-id]", { hasText: "旧告警 59" }).waitFor();
    expect(await page.locator("#alert-history tr[data-id]").count()).toBe(50);
    await page.locator("#alert-history").locator("xpath=../..").locator(".pager button[data-page='2']").click();
    await page.locator("#alert-history tr[data-id]", { hasText: "旧告警 0" }).waitFor();
    expect(await page.locator("#alert-history tr[data-id]").count()).toBe(10);
    expect(await page.locator("#alert-history").textContent()).not.toContain("未解除 ");
  });

  test("long unbroken names wrap inside their table instead of pushing row actions off the card (1440 px)", async () => {
    await seeded.api.json("POST", "/api/admin/users", { name: "U".repeat(64), password: "long-user-password-1" }, 201);
    await seeded.api.json("POST", "/api/admin/referer-whitelist", { pattern: `${"a".repeat(60)}.${"b".repeat(60)}.${"c".repeat(60)}.example.com` }, 201);
    for (const [view, table] of [
      ["users", "#user-table"],
      ["referers", "#referer-table"],
    ] as const) {
      await openPage(page, view);
      await page.locator(`${table} tbody tr`, { hasText: view === "users" ? "UUUU" : "aaaa" }).waitFor();
      const fit = await page.evaluate((sel) => {
        const t = document.querySelector(sel)!;
        const card = t.closest(".view")!;
        return { page: document.documentElement.scrollWidth, tableRight: t.getBoundingClientRect().right, cardRight: card.getBoundingClientRect().right };
      }, table);
      expect({ view, page: fit.page <= DESKTOP.width, inCard: fit.tableRight <= fit.cardRight + 1 }).toEqual({ view, page: true, inCard: true });
    }
  });

  test("image detail shows owner, shared-file count and cleanup state; the dashboard's top images open their image", async () => {
    const bytes = await makeJpeg(64, 48, 4242);
    const alice = new Session(seeded.server);
    expect((await alice.login("alice", "alice-password-1")).status).toBe(200);
    const theirs = (await alice.json("POST", "/api/admin/upload", form(bytes, "alice-photo.jpg"))).id as string;
    await seeded.api.json("POST", "/api/admin/upload", form(bytes, "admin-copy.jpg"));
    const detail = page.locator("#image-detail");
    const open = async (name: string) => {
      await openPage(page, "images");
      // An earlier test may have left an owner chosen.
      await page.locator("select[name=owner]").selectOption("");
      await page.locator("input[name=search]").fill(name);
      await page.locator("#image-count", { hasText: "共 1 张" }).waitFor();
      await page.locator("#image-grid figure", { hasText: name }).locator("button.thumb").click();
      await detail.locator(".facts", { hasText: name }).waitFor();
      await detail.locator(".facts").waitFor();
    };
    await open("alice-photo");
    const owner = (await seeded.api.json("GET", `/api/admin/images/${theirs}`)).user_id as string;
    expect(await detail.locator("#detail-owner").getAttribute("href")).toBe(`#images?user=${owner}`);
    expect(await detail.textContent()).toContain("2 张图片共用这份文件");
    await detail.getByRole("button", { name: "关闭" }).click();
    await open("old-poster");
    expect(await detail.textContent()).toContain("在待清理列表中");
    await detail.getByRole("button", { name: "关闭" }).click();

    const top = (await seeded.api.json("GET", "/api/admin/dashboard")).top_images[0];
    await openPage(page, "dashboard");
    await page.locator(`#top-images a[data-id='${top.id}']`).click();
    await detail.locator(".facts").waitFor();
    expect(await detail.locator(".facts").textContent()).toContain(top.id);
    await detail.getByRole("button", { name: "关闭" }).click();
  });

  test("login: the rate-limit message says how long to wait (Retry-After)", async () => {
    const fresh = await watchedPage(browser, base, DESKTOP, problems);
    await fresh.goto(`${base}/`);
    const error = fresh.locator("#login-form .error");
    for (let i = 0; i < 6; i++) {
      await fresh.locator("#login-form input[name=name]").fill("nobody");
      await fresh.locator("#login-form input[name=password]").fill(`wrong-password-${i}`);
      await fresh.locator("#login-form button[type=submit]").click();
      await fresh.waitForFunction(
        () =>
          (document.querySelector("#login-form .error")?.textContent ?? "") !== "" &&
          !document.querySelector<HTMLButtonElement>("#login-form button[type=submit]")?.disabled,
      );
      if (i < 5) await fresh.evaluate(() => (document.querySelector("#login-form .error")!.textContent = ""));
    }
    expect(await error.textContent()).toMatch(/登录尝试过于频繁，请 \d+ 秒后再试/);
    await fresh.context().close();
  });

  test("no page errors, console errors or foreign requests", () => {
    expect(problems).toEqual([]);
  });
});
