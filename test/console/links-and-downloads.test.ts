// Console audit of links, the audit log and downloads, in a real headless Chromium against a Kura
// process: the images and audit filters live in the page's link and survive tab switches and reloads
// (item 7); the audit log names the system 系统, filters by it and by deleted users, and shows details
// as lines (item 5); snapshot, export and rclone-config downloads say why they failed (item 8);
// thumbnails load in redirect access mode with resizing off (item 4).
import { afterAll, beforeAll, expect, test } from "bun:test";
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Browser, Page } from "playwright-core";
import { adminSession, Session } from "../helpers/client";
import { form, makeAnimated, makeJpeg } from "../helpers/images";
import { KuraServer } from "../helpers/server";
import { waitReplicaState } from "../http/channels.helpers";
import { ADMIN_PASSWORD, DESKTOP, loginAs, openPage, sharedBrowser, watchedPage } from "./harness";

const BULK = 30;
let server: KuraServer;
let admin: Session;
let browser: Browser;
let page: Page;
const problems: string[] = [];
const dirs: string[] = [];
/** A check that fails without its fix: quicker than the harness's generous default. */
const SOON = { timeout: 10_000 };

beforeAll(async () => {
  [server, browser] = await Promise.all([KuraServer.start(), sharedBrowser()]);
  admin = await adminSession(server, ADMIN_PASSWORD);
  for (let i = 0; i < BULK; i++) await admin.json("POST", "/api/admin/upload", form(await makeJpeg(48, 36, 300 + i), `bulk-${String(i).padStart(2, "0")}.jpg`));
  page = await watchedPage(browser, server.base, DESKTOP, problems);
  page.on("dialog", (d) => void d.accept());
  await loginAs(page, server.base, "admin", ADMIN_PASSWORD);
}, 90_000);

afterAll(async () => {
  await page?.context().close();
  await server?.dispose();
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

const hash = () => page.evaluate(() => decodeURIComponent(location.hash));
const toast = (text: string) => page.locator(".toast.error", { hasText: text });

test("#images: a list that answers late (asked before a search) does not replace the search's result", async () => {
  const held = /\/api\/admin\/images\?(?!.*search=)/;
  await page.route(held, async (route) => {
    await Bun.sleep(1500);
    await route.continue().catch(() => {});
  });
  try {
    const late = page.waitForResponse(held);
    await openPage(page, "images");
    await page.locator("input[name=search]").fill("bulk-0");
    await page.locator("#image-count", { hasText: "共 10 张" }).waitFor(SOON);
    await late; // the unfiltered list has answered
    await page.evaluate(() => new Promise((done) => setTimeout(done, 50))); // and the page has had its turn with it
    expect(await page.locator("#image-count").textContent()).toContain("共 10 张");
  } finally {
    await page.unroute(held);
  }
});

test("#images: search and page are in the link and come back after another tab and after a reload", async () => {
  await openPage(page, "images");
  await page.locator("input[name=search]").fill("bulk");
  // The search is sent after a pause in typing: wait for its answer, not the first list's.
  await page.waitForFunction(() => location.hash === "#images?search=bulk");
  await page.locator("#image-pager button[data-page='2']").click();
  await page.locator("#image-pager button[aria-current=page][data-page='2']").waitFor();
  expect(await hash()).toBe("#images?search=bulk&page=2");

  const sameView = async () => {
    await page.locator("#image-pager button[aria-current=page][data-page='2']").waitFor(SOON);
    expect(await page.locator("input[name=search]").inputValue()).toBe("bulk");
    expect(await page.locator("#image-grid .tile").count()).toBe(BULK - 24);
  };
  // Another tab, then back through the tab bar.
  await page.locator("nav a[data-tab=upload]").click();
  await page.locator("nav a[data-tab=upload].active").waitFor();
  await page.locator("nav a[data-tab=images]").click();
  await sameView();
  await page.reload();
  await sameView();
  // A bare #images is the unfiltered list, and the tab link follows it.
  await openPage(page, "images");
  await page.locator("#image-count", { hasText: "第 1 /" }).waitFor();
  expect(await page.locator("input[name=search]").inputValue()).toBe("");
  expect(await page.locator("nav a[data-tab=images]").getAttribute("href")).toBe("#images");
});

test("#audit: the system is 系统 and filterable, a deleted user too; details read as lines, objects by name", async () => {
  // A deleted user who did something first.
  await admin.json("POST", "/api/admin/users", { name: "carol", password: "carol-password-1" }, 201);
  expect((await new Session(server).login("carol", "carol-password-1")).status).toBe(200);
  const carol = (await admin.json("GET", "/api/admin/users")).items.find((u: { name: string }) => u.name === "carol").id as string;
  await admin.json("DELETE", `/api/admin/users/${carol}`, undefined, 204);
  // The system's own entry: the cleanup sweep expires an image.
  await admin.json("POST", "/api/admin/upload", form(await makeJpeg(30, 20, 80), "one-second.jpg", { ttl: "1" }));
  await admin.json("PUT", "/api/admin/config", { cleanup_sweep_seconds: 1 });
  for (let i = 0; i < 100 && (await admin.json("GET", "/api/admin/audit?actor=system")).total === 0; i++) await Bun.sleep(200);
  await admin.json("PUT", "/api/admin/config", { cleanup_sweep_seconds: 300 });

  await openPage(page, "audit");
  const rows = page.locator("#audit-table tr[data-id]");
  await rows.first().waitFor();
  const actor = page.locator("#audit-filters select[name=actor]");
  await actor.selectOption({ label: "系统" }, SOON);
  await page.locator("#audit-filters button[type=submit]").click();
  await page.locator("#audit-table tr[data-action='image.expire']").first().waitFor();
  expect(new Set(await rows.locator("td:nth-child(2)").allTextContents())).toEqual(new Set(["系统"]));

  await actor.selectOption({ label: "carol（已删除）" }, SOON);
  await page.locator("#audit-filters button[type=submit]").click();
  await page.locator("#audit-table tr[data-action='auth.login']").waitFor();
  expect(new Set(await rows.locator("td:nth-child(2)").allTextContents())).toEqual(new Set(["carol"]));
  expect(await hash()).toBe(`#audit?actor=${carol}`);

  // The admin's user.delete of carol: object by name, details as lines, no JSON.
  await actor.selectOption("");
  await page.locator("#audit-filters input[name=action]").fill("user.delete");
  await page.locator("#audit-filters button[type=submit]").click();
  const deleted = page.locator("#audit-table tr[data-action='user.delete']");
  await deleted.waitFor();
  expect(await deleted.locator("td:nth-child(4)").textContent()).toBe(`carol ${carol}`);
  expect(await deleted.locator("td:nth-child(5) li").allTextContents()).toEqual(["名称: carol"]);
  expect(await page.locator("#audit-table").textContent()).not.toContain('{"');
  // The filter is in the link: a reload keeps it.
  expect(await hash()).toBe("#audit?action=user.delete");
  await page.reload();
  await deleted.waitFor();
  expect(await page.locator("#audit-filters input[name=action]").inputValue()).toBe("user.delete");
  expect(await rows.count()).toBe(1);
});

test("#backups: a snapshot no channel holds any more says so; the export downloads", async () => {
  const snap = await admin.json("POST", "/api/admin/backups", undefined, 201);
  await openPage(page, "backups");
  const row = page.locator(`#backup-table tr[data-name='${snap.name}']`);
  await row.waitFor();
  // Gone from the channel behind the page's back (the local channel keeps it under _kura/backups/).
  const found = readdirSync(server.dataDir, { recursive: true, encoding: "utf8" }).filter((p) => p.endsWith(`backups/${snap.name}`));
  expect(found.length).toBeGreaterThan(0);
  for (const p of found) rmSync(join(server.dataDir, p));
  await row.locator("a[data-action=download]").click();
  await toast("下载失败：没有健康的存储渠道持有该快照").waitFor(SOON);

  const [saved] = await Promise.all([page.waitForEvent("download"), page.locator("#export-download").click()]);
  expect(saved.suggestedFilename()).toMatch(/^kura-export-\d{8}T\d{6}\.json$/);
  const exported = JSON.parse(readFileSync((await saved.path())!, "utf8"));
  expect(Object.keys(exported)).toContain("images");
});

test("#channels: the rclone config of a channel removed meanwhile says so; an existing one downloads", async () => {
  const dir = mkdtempSync(join(tmpdir(), "kura-console-spare-"));
  dirs.push(dir);
  const spare = await admin.json("POST", "/api/admin/channels", { name: "spare", driver: "local", config: { path: dir } }, 201);
  await openPage(page, "channels");
  const row = page.locator("#channel-table tr[data-name=spare]");
  await row.waitFor();
  await admin.json("DELETE", `/api/admin/channels/${spare.id}?purge=false`, undefined, 204);
  await row.locator("a[data-action=rclone-config]").click();
  await toast("下载失败：存储渠道不存在").waitFor(SOON);

  const local = page.locator("#channel-table tr[data-name=local]");
  const [saved] = await Promise.all([page.waitForEvent("download"), local.locator("a[data-action=rclone-config]").click()]);
  expect(saved.suggestedFilename()).toMatch(/^kura-\d+\.conf$/);
  expect(readFileSync((await saved.path())!, "utf8")).toContain("type = local");
});

test("thumbnails in redirect mode with resizing off are served by Kura, never sent to the channel's address", async () => {
  const dir = mkdtempSync(join(tmpdir(), "kura-console-direct-"));
  dirs.push(dir);
  // Its public address is another origin: the console's CSP (img-src 'self') refuses images from there.
  const ch = await admin.json(
    "POST",
    "/api/admin/channels",
    {
      name: "direct",
      driver: "local",
      config: { path: dir, public_base_url: "http://127.0.0.1:9/kura/" },
      priority: 50,
      encrypted: false,
      allow_direct_link: true,
    },
    201,
  );
  const jpeg = (await admin.json("POST", "/api/admin/upload", form(await makeJpeg(64, 48, 90), "direct-photo.jpg"))).id as string;
  const gif = (await admin.json("POST", "/api/admin/upload", form(await makeAnimated("gif", 40, 30), "direct-anim.gif"))).id as string;
  for (const id of [jpeg, gif]) await waitReplicaState(admin, id, ch.id, "done");
  // No widths, and no WebP for Chromium's Accept to turn the originals into: GIF is not allowed either.
  await admin.json("PUT", "/api/admin/config", { access_mode: "redirect", process_widths: null, process_formats: ["jpeg", "png"] });
  try {
    // As the spec has it, the plain thumb address of an original redirects to the channel.
    expect((await admin.request("GET", `/api/admin/images/${jpeg}/thumb`)).status).toBe(302);
    const fresh = await watchedPage(browser, server.base, DESKTOP, problems);
    await loginAs(fresh, server.base, "admin", ADMIN_PASSWORD);
    await openPage(fresh, "images");
    const loaded = (id: string) =>
      fresh.waitForFunction(
        (sel) => {
          const img = document.querySelector<HTMLImageElement>(sel);
          return !!img && img.complete && img.naturalWidth > 0;
        },
        `#image-grid .tile[data-id="${id}"] img`,
        SOON,
      );
    await loaded(jpeg);
    await loaded(gif);
    await fresh.locator(`#image-grid .tile[data-id="${gif}"] button.thumb`).click();
    await fresh.waitForFunction(() => {
      const img = document.querySelector<HTMLImageElement>("#image-detail .detail-preview img");
      return !!img && img.complete && img.naturalWidth > 0;
    }, SOON);
    await fresh.context().close();
  } finally {
    await admin.json("PUT", "/api/admin/config", { access_mode: "proxy", process_widths: [320, 640], process_formats: ["webp", "jpeg", "png", "avif"] });
  }
  // Refused formats answer 400 (filtered by the harness); a CSP refusal or a request to the channel would be listed.
  expect(problems).toEqual([]);
});
