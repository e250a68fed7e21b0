// The admin console in a real headless Chromium against a real Kura process: the daily path
// of a self-hoster, from the factory password to deleting an image. Every step that changes
// something is checked again through the HTTP API, not only on screen.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { BrowserContext, Page } from "playwright-core";
import { Session } from "../helpers/client";
import { makeJpeg } from "../helpers/images";
import { KuraServer } from "../helpers/server";
import { ACTION_TIMEOUT_MS, sharedBrowser, shot } from "./harness";

const NEW_PASSWORD = "console-password-1";

let server: KuraServer;
let context: BrowserContext;
let page: Page;
let api: Session; // independent admin session used to verify what the browser did
let imageId = "";
const problems: string[] = []; // console errors, CSP violations, foreign requests

beforeAll(async () => {
  server = await KuraServer.start();
  context = await (await sharedBrowser()).newContext({ viewport: { width: 1280, height: 860 } });
  page = await context.newPage();
  page.setDefaultTimeout(ACTION_TIMEOUT_MS);
  page.on("dialog", (d) => void d.accept()); // confirm() before deletes
  page.on("pageerror", (e) => problems.push(`页面异常：${e.message}`));
  page.on("console", (m) => {
    // 4xx answers the test provokes on purpose are logged by Chromium as resource errors.
    if (m.type() === "error" && !/status of 4\d\d/.test(m.text())) problems.push(`控制台错误：${m.text()}`);
  });
  page.on("request", (r) => {
    const u = r.url();
    if (!u.startsWith(server.base) && !u.startsWith("data:") && !u.startsWith("blob:")) problems.push(`外部请求：${u}`);
  });
}, 30_000);

afterAll(async () => {
  await context?.close();
  await server?.dispose();
});

async function login(name: string, password: string) {
  await page.locator("#login-form input[name=name]").fill(name);
  await page.locator("#login-form input[name=password]").fill(password);
  await page.locator("#login-form button[type=submit]").click();
}

async function openTab(id: string) {
  await page.locator(`nav a[data-tab=${id}]`).click();
  await page.locator(`nav a[data-tab=${id}].active`).waitFor();
}

describe("admin console in headless Chromium", () => {
  test("the page is self-contained and locked down by its CSP", async () => {
    const res = await fetch(server.url("/"));
    const csp = res.headers.get("content-security-policy") ?? "";
    expect(csp).toContain("script-src 'sha256-");
    expect(csp).not.toContain("unsafe-inline");
    expect(csp).not.toMatch(/https?:\/\//);
    const html = await res.text();
    expect(html).not.toMatch(/<script[^>]+src=|<link[^>]+stylesheet/);
  });

  test("factory password forces a change, then the new password logs in", async () => {
    await page.goto(server.url("/"));
    await login("admin", server.defaultPassword());
    const force = page.locator("#force-password-form");
    await force.waitFor();
    // No tabs until the password is changed.
    expect(await page.locator("nav a[data-tab]").count()).toBe(0);
    await force.locator("input[name=old_password]").fill(server.defaultPassword());
    await force.locator("input[name=new_password]").fill(NEW_PASSWORD);
    await force.locator("input[name=new_password_again]").fill(NEW_PASSWORD);
    await force.locator("button[type=submit]").click();
    await page.locator("#login-form").waitFor();
    expect(await page.locator(".notice").textContent()).toContain("密码已修改");

    await login("admin", NEW_PASSWORD);
    // The administrator lands on the dashboard.
    await page.locator("nav a[data-tab=dashboard].active").waitFor();
    expect(await page.locator("#me-name").textContent()).toBe("admin");
    // Admin-only tabs are present for the admin.
    expect(await page.locator("nav a[data-tab]").allTextContents()).toEqual([
      "概览",
      "上传",
      "图片",
      "上传令牌",
      "用户",
      "存储渠道",
      "审核",
      "备份",
      "审计与告警",
      "设置",
      "防盗链",
    ]);
    await openTab("upload");

    api = new Session(server);
    expect((await api.login("admin", NEW_PASSWORD)).status).toBe(200);
    expect((await new Session(server).login("admin", server.defaultPassword())).status).toBe(401);
  });

  test("uploads a JPEG through the file input and shows its links", async () => {
    const jpeg = await makeJpeg(800, 600, 7);
    await page.locator("#file-input").setInputFiles({ name: "console-photo.jpg", mimeType: "image/jpeg", buffer: jpeg });
    const link = page.locator("#upload-results .result.ok .uploaded-url");
    await link.waitFor();
    const url = (await link.textContent())!;
    expect(url).toMatch(new RegExp(`^${server.base}/i/[0-9A-Za-z]{10}$`));
    imageId = url.split("/").pop()!;
    expect(await page.locator("#upload-results .result.ok .copy-row button").allTextContents()).toEqual([
      "复制 URL",
      "复制 Markdown",
      "复制 Markdown（带链接）",
      "复制 HTML",
      "复制 BBCode",
      "复制 缩略图",
    ]);
    // The link really serves the uploaded image.
    const served = await fetch(url);
    expect(served.status).toBe(200);
    expect(served.headers.get("content-type")).toStartWith("image/");

    // URL import goes through the server's public-address check: loopback is refused, and the
    // server's Chinese reason is shown on the row.
    await page.locator("#import-form input[name=import_url]").fill(`${server.base}/i/${imageId}`);
    await page.locator("#import-form button[type=submit]").click();
    const failed = page.locator("#upload-results .result.failed .status");
    await failed.waitFor();
    expect(await failed.textContent()).toMatch(/^失败：.*[\u4e00-\u9fff]/);
  });

  test("the grid shows the image with a loaded thumbnail and a detail panel", async () => {
    await openTab("images");
    const thumb = page.locator(`.tile[data-id="${imageId}"] img`);
    await thumb.waitFor();
    await page.waitForFunction((id) => {
      const img = document.querySelector<HTMLImageElement>(`.tile[data-id="${id}"] img`);
      return !!img && img.complete && img.naturalWidth > 0;
    }, imageId);
    // Smallest allowed width of the default process_widths.
    expect(await thumb.evaluate((img: HTMLImageElement) => img.naturalWidth)).toBe(320);
    await shot(page, "console", { fullPage: false });

    await page.locator(`.tile[data-id="${imageId}"] .thumb`).click();
    const detail = page.locator("#image-detail");
    await detail.locator(".facts").waitFor();
    const text = (await detail.textContent())!;
    expect(text).toContain("console-photo.jpg");
    expect(text).toContain("800 × 600");
    expect(await detail.locator("table.replicas tbody tr").count()).toBeGreaterThan(0);
    expect(await detail.locator("table.replicas .badge").first().textContent()).toBe("已完成");

    await detail.locator("#ttl-form input[name=ttl_hours]").fill("48");
    await detail.locator("#ttl-form button[type=submit]").click();
    await detail.getByText("有效期 48 小时").waitFor();
    const img = await api.json("GET", `/api/admin/images/${imageId}`);
    expect(img.ttl_seconds).toBe(48 * 3600);
    expect(img.expire_at).not.toBeNull();
    await page.keyboard.press("Escape");
    await detail.waitFor({ state: "detached" });
  });

  test("issues a token: plaintext once, PicGo JSON that really uploads", async () => {
    await openTab("tokens");
    await page.locator("#token-form input[name=token_name]").fill("PicGo-笔记本");
    await page.locator("#token-form button[type=submit]").click();
    const issued = page.locator("#token-issued");
    await issued.waitFor();
    const token = await issued.locator("input[data-field=token]").inputValue();
    expect(token).toMatch(/^kura_[a-z2-7]{12}_[A-Za-z0-9_-]{43}$/);
    const picgo = JSON.parse(await issued.locator("textarea[data-field=picgo]").inputValue());
    const uploader = picgo.picBed["web-uploader"];
    expect(uploader.url).toBe(`${server.base}/api/upload`);
    expect(JSON.parse(uploader.customHeader)).toEqual({ Authorization: `Bearer ${token}` });
    const sxcu = JSON.parse(await issued.locator("textarea[data-field=sharex]").inputValue());
    expect(sxcu.Headers.Authorization).toBe(`Bearer ${token}`);

    // Use the snippet exactly as PicGo would: URL, header and field name from the JSON.
    const form = new FormData();
    form.append(uploader.paramName, new Blob([new Uint8Array(await makeJpeg(40, 30, 9))]), "picgo.jpg");
    const up = await fetch(uploader.url, { method: "POST", headers: JSON.parse(uploader.customHeader), body: form });
    expect(up.status).toBe(200);
    expect((await up.json())[uploader.jsonPath]).toMatch(/\/i\/[0-9A-Za-z]{10}$/);

    // The Lsky Pro snippet, as picgo-plugin-lankong sends it, and the Chevereto settings, as ShareX sends them.
    const lankong = JSON.parse(await issued.locator("textarea[data-field=lankong]").inputValue()).picBed.lankong;
    const lsky = new FormData();
    lsky.append("file", new Blob([new Uint8Array(await makeJpeg(40, 30, 10))]), "lsky.jpg");
    const lskyUp = await fetch(`${lankong.server}/api/v1/upload`, { method: "POST", headers: { Authorization: lankong.token }, body: lsky });
    expect(((await lskyUp.json()) as { data: { links: { url: string } } }).data.links.url).toMatch(/\/i\/[0-9A-Za-z]{10}\.jpg$/);
    const chevereto = await issued.locator("textarea[data-field=chevereto]").inputValue();
    const sharex = new FormData();
    sharex.append("key", chevereto.match(/API key：(\S+)/)![1]!);
    sharex.append("source", new Blob([new Uint8Array(await makeJpeg(40, 30, 11))]), "sharex.jpg");
    const cheveretoUp = await fetch(chevereto.match(/：(http\S+)/)![1]!, { method: "POST", body: sharex });
    expect(cheveretoUp.status).toBe(200);

    await page.keyboard.press("Escape");
    await page.locator('#token-table tr[data-name="PicGo-笔记本"]').getByText("有效").waitFor();
  });

  test("creates a user as admin", async () => {
    await openTab("users");
    await page.locator("#user-form input[name=new_user_name]").fill("alice");
    await page.locator("#user-form input[name=new_user_password]").fill("alice-password-1");
    await page.locator("#user-form button[type=submit]").click();
    await page.locator('#user-table tr[data-name="alice"]').waitFor();
    const users = await api.json("GET", "/api/admin/users");
    const alice = users.items.find((u: { name: string }) => u.name === "alice");
    expect(alice?.role).toBe("user");
    expect((await new Session(server).login("alice", "alice-password-1")).status).toBe(200);
  });

  test("the channels tab lists channels; the dashboard shows open alerts", async () => {
    await openTab("channels");
    await page.locator("#channel-table tr[data-id]").first().waitFor();
    expect(await page.locator("#channel-table").textContent()).toContain("local");
    await openTab("dashboard");
    await page.locator("#dashboard-alerts", { hasText: "没有未解除的告警" }).waitFor();
  });

  test("changes a setting, and shows the server's message for an invalid one", async () => {
    await openTab("settings");
    const form = page.locator("#settings-form");
    const mb = form.locator("input[name=max_upload_mb]");
    await mb.waitFor();
    await mb.fill("33");
    await form.locator("button[type=submit]").click();
    await page.getByText("已保存 1 项").waitFor();
    expect((await api.json("GET", "/api/admin/config/full")).settings.max_upload_mb).toBe(33);

    await form.locator("input[name=max_upload_mb]").fill("0");
    await form.locator("button[type=submit]").click();
    await page.waitForFunction(() => (document.querySelector("#settings-error")?.textContent ?? "") !== "");
    expect(await page.locator("#settings-error").textContent()).toMatch(/[\u4e00-\u9fff]/);
    expect((await api.json("GET", "/api/admin/config/full")).settings.max_upload_mb).toBe(33);
  });

  test("deletes the image from its detail panel, then logs out", async () => {
    await openTab("images");
    await page.locator(`.tile[data-id="${imageId}"] .thumb`).click();
    await page.locator("#image-detail #detail-delete").click();
    await page.locator(`.tile[data-id="${imageId}"]`).waitFor({ state: "detached" });
    expect((await api.request("GET", `/api/admin/images/${imageId}`)).status).toBe(404);

    await page.locator("#logout").click();
    await page.locator("#login-form").waitFor();
    await page.reload();
    await page.locator("#login-form").waitFor();
  });

  test("a plain user sees only upload, images and tokens", async () => {
    await login("alice", "alice-password-1");
    await page.locator("nav a.active").waitFor();
    expect(await page.locator("nav a[data-tab]").allTextContents()).toEqual(["概览", "上传", "图片", "上传令牌"]);
    await openTab("images");
    // alice has no images; the admin's (uploaded above through the token) stay invisible.
    await page.getByText("还没有图片").waitFor();
    expect(problems).toEqual([]);
  });
});
