// Shared set-up for the console page tests: one Kura server seeded with what the pages show
// (a similar-image pair, cold images, 60+ images), one headless Chromium, a page that records
// every page error, console error, CSP violation and request to another origin, and
// screenshots for review when asked for (KURA_TEST_SCREENSHOTS=1).
import { Database } from "bun:sqlite";
import { existsSync, mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { chromium, type Browser, type Locator, type Page } from "playwright-core";
import sharp from "sharp";
import { scanRound } from "../../src/images/dedup";
import { computePhash } from "../../src/images/jobs";
import { adminSession, Session } from "../helpers/client";
import { openContext } from "../helpers/context";
import { form, makeJpeg, sha256 } from "../helpers/images";
import { KuraServer } from "../helpers/server";

export const CHROMIUM = "/usr/bin/chromium";
export const ADMIN_PASSWORD = "pages-admin-password-1";
export const DESKTOP = { width: 1440, height: 900 };
export const PHONE = { width: 390, height: 844 };
/**
 * How long a Playwright action or wait may take. Generous: a passing step takes well under a
 * second, but CI runs the suite on two busy cores, where one paint took past 10 s once.
 */
export const ACTION_TIMEOUT_MS = 30_000;

export function launchBrowser(): Promise<Browser> {
  // Never skip: a missing browser must fail CI loudly and say what to install.
  if (!existsSync(CHROMIUM)) throw new Error(`找不到 ${CHROMIUM}：控制台测试需要 Debian 软件包 chromium（apt-get install -y chromium）`);
  return chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: [
      "--headless",
      "--no-sandbox",
      "--disable-gpu",
      "--disable-quic",
      "--no-first-run",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
    ],
  });
}

let shared: Promise<Browser> | undefined;

/**
 * One Chromium for every console test file that runs in the same process (plain `bun test`, or one
 * worker of `bun run test`'s `--parallel --no-isolate`): launching is the slow part. Files close their
 * own contexts; the browser goes when the process does (Playwright kills browsers it launched at exit;
 * beforeExit closes it gracefully first).
 */
export function sharedBrowser(): Promise<Browser> {
  shared ??= launchBrowser().then((browser) => {
    process.once("beforeExit", () => void browser.close());
    return browser;
  });
  return shared;
}

/** A page whose problems (page errors, console errors, foreign requests) land in `problems`. */
export async function watchedPage(browser: Browser, base: string, viewport: { width: number; height: number }, problems: string[]): Promise<Page> {
  const context = await browser.newContext({ viewport, locale: "zh-CN" });
  const page = await context.newPage();
  page.setDefaultTimeout(ACTION_TIMEOUT_MS);
  page.on("pageerror", (e) => problems.push(`页面异常：${e.message}`));
  page.on("console", (m) => {
    // 4xx answers the tests provoke on purpose are logged by Chromium as resource errors.
    if (m.type() === "error" && !/status of 4\d\d/.test(m.text())) problems.push(`控制台错误：${m.text()}`);
  });
  page.on("request", (r) => {
    const u = r.url();
    if (!u.startsWith(base) && !u.startsWith("data:") && !u.startsWith("blob:")) problems.push(`外部请求：${u}`);
  });
  return page;
}

/**
 * Screenshots for a person to look at, with KURA_TEST_SCREENSHOTS=1 (`bun test test/console`): the
 * tests check layout from the DOM (what scrolls, what overlaps), so a suite run takes none, which
 * saves Chromium's full-page paints (~5 s of CPU in pages.test.ts alone).
 */
export const SHOTS = process.env.KURA_TEST_SCREENSHOTS === "1";
export const SHOT_DIR = SHOTS ? mkdtempSync(join(tmpdir(), "kura-console-shots-")) : "";

/**
 * A picture of the page (when SHOTS). `fullPage: false` takes the viewport only: for the API reference, whose full
 * height (every operation of openapi.yaml) takes Chromium past 10 s to paint on two busy cores.
 */
export async function shot(page: Page, name: string, { fullPage = true } = {}): Promise<void> {
  if (SHOTS) await page.screenshot({ path: join(SHOT_DIR, `${name}.png`), fullPage });
}

/** Two smooth pictures at two JPEG qualities: different bytes, near-identical perceptual hash. */
function wave(quality: number): Promise<Buffer> {
  const [w, h] = [160, 120];
  const px = Buffer.alloc(w * h * 3);
  for (let y = 0; y < h; y++) {
    for (let x = 0; x < w; x++) {
      const v = (Math.sin(x / 9) * Math.cos(y / 13) + 1) * 127;
      px.set([v, (v * 0.7 + x) % 256, 255 - v], (y * w + x) * 3);
    }
  }
  return sharp(px, { raw: { width: w, height: h, channels: 3 } })
    .jpeg({ quality })
    .toBuffer();
}

export interface Seeded {
  server: KuraServer;
  api: Session;
  pair: { keep: string; drop: string };
  cold: string[];
  bulk: string[];
  dispose(): Promise<void>;
}

/**
 * The seeded server. Perceptual hashing waits 30 s after upload and the similarity scan an
 * hour, so both run in-process over the stopped server's data (as test/http/review.test.ts
 * does); the cold images get an old upload time, which the sweep at start flags under `cold_cleanup_days`.
 */
export async function seedServer(bulkCount: number, env: Record<string, string> = {}): Promise<Seeded> {
  const first = await KuraServer.start();
  let admin = await adminSession(first, ADMIN_PASSWORD);
  const upload = async (bytes: Buffer, name: string) => (await admin.json("POST", "/api/admin/upload", form(bytes, name))).id as string;
  const a = await wave(92);
  const b = await wave(35);
  const pair = { keep: await upload(a, "sunset-original.jpg"), drop: await upload(b, "sunset-small.jpg") };
  const cold = [await upload(await makeJpeg(120, 90, 201), "old-poster.jpg"), await upload(await makeJpeg(120, 90, 202), "old-banner.jpg")];
  const bulk: string[] = [];
  for (let i = 0; i < bulkCount; i++) bulk.push(await upload(await makeJpeg(48, 36, 1000 + i), `bulk-${String(i).padStart(2, "0")}.jpg`));
  await admin.json("POST", "/api/admin/users", { name: "alice", password: "alice-password-1" }, 201);
  await admin.json("PUT", "/api/admin/config", { cold_cleanup_days: 30 });

  await first.stop();
  const ctx = await openContext(first.dataDir);
  try {
    for (const bytes of [a, b]) await computePhash(ctx.app, { blob_id: ctx.app.images.blobBySha(sha256(bytes))!.id });
    if ((await scanRound(ctx.app)).found !== 1) throw new Error("相似图片扫描没有找到预期的一组");
  } finally {
    ctx.close();
  }
  // Uploaded long ago and never viewed: the sweep at start flags them cold (cold_cleanup_days is set below).
  let db = new Database(join(first.dataDir, "kura.db"));
  for (const id of cold) db.query("UPDATE images SET created_at = '2001-01-01 00:00:00' WHERE id = ?").run(id);
  db.close();

  const server = await KuraServer.start({ dataDir: first.dataDir, env });
  // What a failed scheduled backup of this process leaves behind (backupRound opens it; the next full
  // backup resolves it). Written while the server runs: an open backup_failed does not survive a restart.
  db = new Database(join(first.dataDir, "kura.db"));
  // A second writer beside the running server: wait for its start-up writes instead of failing.
  db.exec("PRAGMA busy_timeout = 10000");
  db.query(
    "INSERT INTO alerts (kind, target, message, opened_at, open_delivered) VALUES ('backup_failed', '', '快照写入渠道 offsite 失败：连接被拒绝', '2026-01-01 00:00:00', 1)",
  ).run();
  db.close();
  admin = new Session(server);
  const res = await admin.login("admin", ADMIN_PASSWORD);
  if (res.status !== 200) throw new Error(`重新登录失败：${res.status}`);
  return {
    server,
    api: admin,
    pair,
    cold,
    bulk,
    async dispose() {
      await server.stop();
      await first.dispose();
    },
  };
}

export async function loginAs(page: Page, base: string, name: string, password: string): Promise<void> {
  await page.goto(`${base}/`);
  await page.locator("#login-form input[name=name]").fill(name);
  await page.locator("#login-form input[name=password]").fill(password);
  await page.locator("#login-form button[type=submit]").click();
  // On a phone the tab bar is collapsed into the menu: present, not visible.
  await page.locator("nav a.active").waitFor({ state: "attached" });
}

/** Opens a page by its deep link and waits until it is the active tab. */
export async function openPage(page: Page, id: string): Promise<void> {
  await page.evaluate((h) => (location.hash = h), `#${id}`);
  await page.locator(`nav a[data-tab=${id}].active`).waitFor({ state: "attached" });
}

/** Fills the channel dialog's OneDrive template for the fake provider (test/channels/fakes/onedrive.ts). */
export async function fillOneDriveTemplate(dialog: Locator, name: string, provider: { origin: string; oauth: { clientId: string; clientSecret: string } }) {
  await dialog.locator("select[name=template]").selectOption("onedrive");
  await dialog.locator("input[name=channel_name]").fill(name);
  await dialog.locator("[data-key=client_id] input").fill(provider.oauth.clientId);
  await dialog.locator("[data-key=client_secret] input").fill(provider.oauth.clientSecret);
  await dialog.locator("[data-key=auth_url] input").fill(`${provider.origin}/authorize`);
  await dialog.locator("[data-key=token_url] input").fill(`${provider.origin}/token`);
  await dialog.locator("[data-key=path] input").fill("kura");
}
