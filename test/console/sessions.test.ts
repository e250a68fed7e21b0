// The console and the browser's one session cookie (audit 15 MED-1, MED-2, LOW-1, LOW-4, LOW-5): every
// tab shares the cookie, so a logout, a re-login or another user's login in one tab changes what the
// other tabs' requests are. Two pages of one browser context stand for two tabs.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { BrowserContext, Page } from "playwright-core";
import { Session } from "../helpers/client";
import { KuraServer } from "../helpers/server";
import { ACTION_TIMEOUT_MS, DESKTOP, openPage, sharedBrowser, watchedPage } from "./harness";

const PASSWORD = "sessions-admin-password";
let server: KuraServer;
let api: Session;
const problems: string[] = [];
const contexts: BrowserContext[] = [];

beforeAll(async () => {
  server = await KuraServer.start();
}, 30_000);

afterAll(async () => {
  for (const c of contexts) await c.close();
  await server?.dispose();
});

/** Two tabs of one browser: the first one opened at `hash`. */
async function twoTabs(hash: string): Promise<[Page, Page]> {
  const browser = await sharedBrowser();
  const a = await watchedPage(browser, server.base, DESKTOP, problems);
  contexts.push(a.context());
  a.on("dialog", (d) => void d.accept());
  await a.goto(`${server.base}/${hash}`);
  const b = await a.context().newPage();
  b.setDefaultTimeout(ACTION_TIMEOUT_MS);
  return [a, b];
}

async function login(page: Page, name: string, password: string): Promise<void> {
  await page.locator("#login-form input[name=name]").fill(name);
  await page.locator("#login-form input[name=password]").fill(password);
  await page.locator("#login-form button[type=submit]").click();
  await page.locator("nav a.active").waitFor({ state: "attached" });
}

/** Tab b logs out, then in again as `name`: the cookie both tabs send now belongs to a new session. */
async function reloginElsewhere(b: Page, name: string, password: string): Promise<void> {
  await b.goto(`${server.base}/#dashboard`);
  await b.locator("#logout").click();
  await b.locator("#login-form").waitFor();
  await login(b, name, password);
}

describe("the console follows the session across tabs", () => {
  test("forced password change: the password form names its account, and the login after it is filled in", async () => {
    const [page] = await twoTabs("");
    await page.locator("#login-form input[name=name]").fill("admin");
    await page.locator("#login-form input[name=password]").fill(server.defaultPassword());
    await page.locator("#login-form button[type=submit]").click();
    const force = page.locator("#force-password-form");
    await force.waitFor();
    // A user-name field in the form, so a password manager can update the right saved login.
    expect(await force.locator("input[autocomplete=username]").inputValue()).toBe("admin");
    await force.locator("input[name=old_password]").fill(server.defaultPassword());
    await force.locator("input[name=new_password]").fill(PASSWORD);
    await force.locator("input[name=new_password_again]").fill(PASSWORD);
    await force.locator("button[type=submit]").click();
    await page.locator("#login-form").waitFor();
    expect(await page.locator("#login-form input[name=name]").inputValue()).toBe("admin");
    expect(await page.evaluate(() => (document.activeElement as HTMLInputElement | null)?.name)).toBe("password");
    await page.locator("#login-form input[name=password]").fill(PASSWORD);
    await page.locator("#login-form button[type=submit]").click();
    await page.locator("nav a[data-tab=dashboard].active").waitFor();

    api = new Session(server);
    expect((await api.login("admin", PASSWORD)).status).toBe(200);
    await api.json("POST", "/api/admin/users", { name: "alice", password: "alice-password-1" }, 201);
  });

  test("after a re-login in another tab, the old tab's save takes the new CSRF token and goes through", async () => {
    const [a, b] = await twoTabs("#referers");
    await login(a, "admin", PASSWORD);
    await reloginElsewhere(b, "admin", PASSWORD);
    await a.locator("#referer-form input").first().fill("fresh-token.example.com");
    await a.locator("#referer-form button[type=submit]").click();
    await a.locator("#referer-table tr", { hasText: "fresh-token.example.com" }).waitFor();
    expect(await a.locator(".toast.error").count()).toBe(0);
    const rules = await api.json("GET", "/api/admin/referer-whitelist");
    expect(rules.items.map((r: { pattern: string }) => r.pattern)).toContain("fresh-token.example.com");
  });

  test("another user logging in in another tab: the old tab is rebuilt for that user and says so", async () => {
    const [a, b] = await twoTabs("#referers");
    await login(a, "admin", PASSWORD);
    await reloginElsewhere(b, "alice", "alice-password-1");
    // A write from the admin's page: refused, explained in words, and the tab now shows alice.
    await a.locator("#referer-form input").first().fill("not-for-alice.example.com");
    await a.locator("#referer-form button[type=submit]").click();
    await a.locator("#me-name", { hasText: "alice" }).waitFor();
    await a.locator(".toast", { hasText: "以 alice 登录" }).waitFor();
    await a.locator(".toast.error", { hasText: "切换了登录账号，刚才的操作没有执行" }).waitFor();
    expect(await a.locator(".toast", { hasText: "CSRF" }).count()).toBe(0);
    expect(await a.locator("nav a[data-tab=users]").count()).toBe(0);

    // Coming back to a tab checks too, without waiting for a refused request.
    await reloginElsewhere(b, "admin", PASSWORD);
    await a.evaluate(() => window.dispatchEvent(new Event("focus")));
    await a.locator("#me-name", { hasText: "admin" }).waitFor();
    expect(await a.locator("nav a[data-tab=users]").count()).toBe(1);

    // A read refused for the new user (an admin-only page) checks as well. The users tab is not
    // waited for: the tab may have come into view first (Playwright brings it to the front) and been
    // rebuilt for alice by that check already, without a users tab; either way it ends as alice's.
    await reloginElsewhere(b, "alice", "alice-password-1");
    await a.evaluate(() => (location.hash = "#users"));
    await a.locator("#me-name", { hasText: "alice" }).waitFor();
    expect(await a.locator("nav a[data-tab=users]").count()).toBe(0);
  });

  test("a session that ends mid-edit asks for the password over the page; the typed settings survive and save", async () => {
    const [a, b] = await twoTabs("#settings");
    await login(a, "admin", PASSWORD);
    const field = a.locator("#set-max_upload_mb");
    await field.fill("77");
    // Logging out in the other tab ends the session this tab uses.
    await b.goto(`${server.base}/#dashboard`);
    await b.locator("#logout").click();
    await b.locator("#login-form").waitFor();
    await a.locator("#settings-form button[type=submit]").click();
    const dialog = a.locator("#relogin-dialog");
    await dialog.waitFor();
    expect(await dialog.locator("input[name=name]").inputValue()).toBe("admin");
    await dialog.locator("input[name=password]").fill(PASSWORD);
    await dialog.locator("button[type=submit]").click();
    await dialog.waitFor({ state: "detached" });
    expect(await field.inputValue()).toBe("77");
    await a.locator("#settings-form button[type=submit]").click();
    await a.getByText("已保存 1 项").waitFor();
    expect((await api.json("GET", "/api/admin/config/full")).settings.max_upload_mb).toBe(77);

    // Closing the dialog without logging in gives the page up: the login screen.
    await login(b, "admin", PASSWORD);
    await b.locator("#logout").click();
    await b.locator("#login-form").waitFor();
    await openPage(a, "users");
    await dialog.waitFor();
    await dialog.getByRole("button", { name: "关闭" }).click();
    await a.locator("#login-form").waitFor();
  });

  test("登录设备 lists the user's sessions by browser and address, ends another device's, the others' and finally its own", async () => {
    // Another device: its own browser context (cookie jar), logged in as alice with a phone's User-Agent.
    const browser = await sharedBrowser();
    const phone = await browser.newContext({ userAgent: "Mozilla/5.0 (Linux; Android 14) AppleWebKit/537.36 Chrome/130.0 Mobile Safari/537.36" });
    contexts.push(phone);
    const phonePage = await phone.newPage();
    await phonePage.goto(`${server.base}/#dashboard`);
    await login(phonePage, "alice", "alice-password-1");
    const spare = new Session(server, { "user-agent": "curl/8.5.0" });
    expect((await spare.login("alice", "alice-password-1")).status).toBe(200);

    const [a] = await twoTabs("");
    await login(a, "alice", "alice-password-1");
    await a.locator("#sessions").click();
    const table = a.locator("#sessions-table");
    const phoneRow = table.locator("tr", { hasText: "Chrome · Android" });
    await phoneRow.waitFor();
    await expect(phoneRow.locator("td").nth(1).textContent()).resolves.toBe("127.0.0.1");
    expect(await table.locator("tr", { hasText: "当前" }).count()).toBe(1);
    await phoneRow.getByRole("button", { name: "退出该设备" }).click();
    await a.getByText("该设备已退出登录").waitFor();
    await phoneRow.waitFor({ state: "detached" });
    // The phone is signed out: its next page load shows the login form.
    await phonePage.reload();
    await phonePage.locator("#login-form").waitFor();

    await table.locator("tr", { hasText: "curl" }).waitFor();
    await a.locator("#end-other-sessions").click();
    await a.getByText(/已让 \d+ 个其他会话退出登录/).waitFor();
    expect((await spare.request("GET", "/api/admin/me")).status).toBe(401);
    await expect(a.locator("#end-other-sessions").isDisabled()).resolves.toBe(true);
    expect(await table.locator("tbody tr").count()).toBe(1);

    await table.getByRole("button", { name: "退出登录" }).click();
    await a.locator("#login-form").waitFor();
  });

  test("no page errors, console errors or foreign requests", () => {
    expect(problems).toEqual([]);
  });
});
