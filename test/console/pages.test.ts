// Every console page in a real headless Chromium against a seeded Kura process, doing what a
// person does there; each change is checked again through the HTTP API. Screenshots of every
// page at 1440×900 and 390×844 are written to SHOT_DIR with KURA_TEST_SCREENSHOTS=1 (printed at the end).
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { PutObjectCommand, S3Client } from "@aws-sdk/client-s3";
import type { Browser, Locator, Page } from "playwright-core";
import { FakeOnedrive } from "../channels/fakes/onedrive";
import { startS3, TEST_CREDENTIALS } from "../channels/s3rver-harness";
import { makeJpeg } from "../helpers/images";
import {
  ADMIN_PASSWORD,
  DESKTOP,
  fillOneDriveTemplate,
  loginAs,
  openPage,
  PHONE,
  seedServer,
  sharedBrowser,
  shot,
  SHOT_DIR,
  SHOTS,
  type Seeded,
  watchedPage,
} from "./harness";

const BULK = 60;
const PAGES = ["dashboard", "upload", "images", "tokens", "users", "channels", "review", "backups", "audit", "settings", "referers"];

/** A local OneDrive (OAuth + Graph API) for the authorisation flow. */
const onedrive = new FakeOnedrive();
let seeded: Seeded;
let browser: Browser;
let page: Page;
let base = "";
const problems: string[] = [];

/** The channel dialog's test, once it has finished: its text, so a failed probe shows the server's reason. */
async function channelTestResult(dialog: Locator): Promise<string> {
  const finished = dialog.locator("#channel-test-result.ok-text, #channel-test-result.bad-text");
  await finished.waitFor();
  return (await finished.textContent()) ?? "";
}
/** What a confirm() dialog answers; the unsaved-changes test flips it once. */
let acceptDialogs = true;

beforeAll(async () => {
  [seeded, browser] = await Promise.all([seedServer(BULK, { KURA_OAUTH_API_BASE_ONEDRIVE: onedrive.origin }), sharedBrowser()]);
  base = seeded.server.base;
  page = await watchedPage(browser, base, DESKTOP, problems);
  page.on("dialog", (d) => void (acceptDialogs ? d.accept() : d.dismiss()));
  await loginAs(page, base, "admin", ADMIN_PASSWORD);
}, 90_000);

afterAll(async () => {
  await page?.context().close();
  await seeded?.dispose();
  onedrive.stop();
  if (SHOTS) console.log(`控制台截图：${SHOT_DIR}`);
});

describe("console pages", () => {
  test("#dashboard is the admin's landing page: channels, off-site warning, per-user usage, pending review", async () => {
    expect(await page.locator("nav a.active").getAttribute("data-tab")).toBe("dashboard");
    await page.locator("#dashboard-channels tr[data-id]").first().waitFor();
    expect(await page.locator("#dashboard-channels").textContent()).toContain("local");
    // Only the local disk holds the images: the off-site warning says so.
    expect(await page.locator("#offsite-warning").textContent()).toContain("没有异地备份");
    expect(await page.locator("#dashboard-users").textContent()).toContain("alice");
    expect(await page.locator("#pending-review").textContent()).toContain("相似 1 组 · 待清理 2 张");
    // The open alert is listed and counted in the top bar on every page.
    expect(await page.locator("#dashboard-alerts").textContent()).toContain("备份失败");
    await page.locator("#alert-badge", { hasText: "告警 1" }).waitFor();
    await shot(page, "dashboard-1440");
  });

  test("every page at 390 px with seeded data: nothing scrolls sideways; desktop and phone screenshots", async () => {
    const phone = await watchedPage(browser, base, PHONE, problems);
    phone.on("dialog", (d) => void d.accept());
    await loginAs(phone, base, "admin", ADMIN_PASSWORD);
    const wide: string[] = [];
    for (const id of PAGES) {
      await openPage(phone, id);
      await phone.waitForLoadState("networkidle");
      await phone.waitForTimeout(150);
      const width = await phone.evaluate(() => Math.max(document.documentElement.scrollWidth, document.body.scrollWidth));
      if (width > PHONE.width) wide.push(`${id}: ${width}px`);
      // Every form control has a label (wrapping label, label[for], aria-label or aria-labelledby).
      const unlabelled = await phone.evaluate(() =>
        [...document.querySelectorAll<HTMLInputElement>("input, select, textarea")]
          .filter(
            (el) =>
              !el.closest("label") &&
              !el.getAttribute("aria-label") &&
              !el.getAttribute("aria-labelledby") &&
              !(el.id && document.querySelector(`label[for="${el.id}"]`)),
          )
          .map((el) => el.name || el.outerHTML.slice(0, 60)),
      );
      if (unlabelled.length) wide.push(`${id}: 无标签的控件 ${unlabelled.join(", ")}`);
      await shot(phone, `${id}-390`);
      if (!["dashboard", "review", "backups", "audit", "channels", "settings", "users", "images", "upload"].includes(id)) {
        await openPage(page, id);
        await page.waitForLoadState("networkidle");
        await shot(page, `${id}-1440`);
      }
    }
    // The collapsed menu opens and lists every page.
    await phone.locator(".menu-toggle").click();
    expect(await phone.locator("nav.tabs.open a[data-tab]").count()).toBe(PAGES.length);
    await shot(phone, "menu-open-390");
    // The channel dialog with a template's fields fits the phone too.
    await openPage(phone, "channels");
    await phone.locator("#channel-new").click();
    await phone.locator("#channel-dialog select[name=template]").selectOption("aws_s3");
    const dialogWidth = await phone.locator("#channel-dialog").evaluate((d) => d.scrollWidth - d.clientWidth);
    if (dialogWidth > 0) wide.push(`channel dialog: ${dialogWidth}px too wide`);
    await shot(phone, "channel-dialog-390", { fullPage: false });
    await phone.keyboard.press("Escape");
    expect(wide).toEqual([]);
    await phone.context().close();
  });

  test("#review: merging a similar pair keeps one file and the pair disappears; cold images can be exempted", async () => {
    await openPage(page, "review");
    const pair = page.locator("#dedup-list .pair");
    await pair.waitFor();
    expect(await pair.locator(".pair-side").count()).toBe(2);
    expect(await pair.textContent()).toContain("所有者 admin");
    await shot(page, "review-1440");
    await pair.locator("button[data-action=keep-a]").click();
    await page.locator("#dedup-list .empty").waitFor();
    expect((await seeded.api.json("GET", "/api/admin/dedup")).total).toBe(0);
    // Both image ids still serve, now from the kept file.
    const kept = await seeded.api.json("GET", `/api/admin/images/${seeded.pair.drop}`);
    expect(kept.ref_count).toBe(2);

    const first = seeded.cold[0]!;
    expect(await page.locator(`#cleanup-table tr[data-id="${first}"] td[data-reason=cold]`).textContent()).toBe("长期未访问");
    await page.locator(`#cleanup-table tr[data-id="${first}"] input[type=checkbox]`).check();
    await page.locator("#cleanup-exempt").click();
    await page.locator(`#cleanup-table tr[data-id="${first}"]`).waitFor({ state: "detached" });
    expect((await seeded.api.json("GET", `/api/admin/images/${first}`)).cleanup_exempt).toBe(true);
    const second = seeded.cold[1]!;
    await page.locator(`#cleanup-table tr[data-id="${second}"] input[type=checkbox]`).check();
    await page.locator("#cleanup-delete").click();
    await page.locator("#cleanup-table .empty").waitFor();
    expect((await seeded.api.request("GET", `/api/admin/images/${second}`)).status).toBe(404);
  });

  test("#backups: take a snapshot now and see it listed", async () => {
    await openPage(page, "backups");
    await page.locator("#backup-table tbody tr").first().waitFor();
    expect(await page.locator("#backup-last").textContent()).toContain("备份失败");
    await page.locator("#backup-now").click();
    const row = page.locator("#backup-table tr[data-name]");
    await row.first().waitFor();
    // A full backup resolves backup_failed: the top-bar badge goes away.
    await page.locator("#alert-badge").waitFor({ state: "hidden" });
    expect((await seeded.api.json("GET", "/api/admin/alerts")).total).toBe(0);
    const name = await row.first().getAttribute("data-name");
    const listed = await seeded.api.json("GET", "/api/admin/backups");
    expect(listed.items.map((s: { name: string }) => s.name)).toContain(name);
    expect(await row.first().textContent()).toContain("local");
    expect(await page.locator("#backup-last").textContent()).toContain("最近一次");
    await shot(page, "backups-1440");
  });

  test("#audit: filtering by action shows only those entries", async () => {
    await openPage(page, "audit");
    await page.locator("#audit-table tr[data-id]").first().waitFor();
    const all = (await seeded.api.json("GET", "/api/admin/audit")).total;
    await page.locator("#audit-filters input[name=action]").fill("dedup.merge");
    await page.locator("#audit-filters button[type=submit]").click();
    await page.waitForFunction(() => document.querySelector("#audit-count")?.textContent === "共 1 条");
    expect(await page.locator("#audit-table tr[data-id]").count()).toBe(1);
    expect(await page.locator("#audit-table tr[data-id]").getAttribute("data-action")).toBe("dedup.merge");
    expect(all).toBeGreaterThan(1);
    // The alert history is on the same page, resolved alerts included.
    await page.locator("#alert-history tr[data-id]").first().waitFor();
    expect(await page.locator("#alert-history tr[data-id]").first().textContent()).toContain("已解除");
    await shot(page, "audit-1440");
  });

  test("#channels: create a local channel from its template, edit it, check it, delete it", async () => {
    await openPage(page, "channels");
    await page.locator("#channel-table tr[data-id]").first().waitFor();
    await page.locator("#channel-new").click();
    const dialog = page.locator("#channel-dialog");
    await dialog.locator("select[name=template]").selectOption("local");
    await dialog.locator("input[name=channel_name]").fill("第二块盘");
    const dir = `${seeded.server.dataDir}/second-disk`;
    await dialog.locator("[data-key=path] input").fill(dir);
    await dialog.locator("#channel-test").click();
    expect(await channelTestResult(dialog)).toBe("连接成功：读写测试通过");
    await shot(page, "channels-create-1440");
    await dialog.locator("button[type=submit]").click();
    const row = page.locator('#channel-table tr[data-name="第二块盘"]');
    await row.waitFor();
    const id = Number(await row.getAttribute("data-id"));

    await row.locator("button[data-action=edit]").click();
    await dialog.locator("input[name=priority]").fill("7");
    // Encrypted is fixed after creation.
    expect(await dialog.locator("input[name=encrypted]").isDisabled()).toBe(true);
    await dialog.locator("button[type=submit]").click();
    await dialog.waitFor({ state: "detached" });
    const after = await seeded.api.json("GET", `/api/admin/channels/${id}/config`);
    expect(after.inputs.path).toBe(dir);
    expect((await seeded.api.json("GET", "/api/admin/channels")).items.find((c: { id: number }) => c.id === id).priority).toBe(7);

    await page.locator(`#channel-table tr[data-id="${id}"] button[data-action=check]`).click();
    await page.getByText("第二块盘：探测成功").waitFor();
    await shot(page, "channels-1440");

    await page.locator(`#channel-table tr[data-id="${id}"] button[data-action=delete]`).click();
    await page.locator("#delete-dialog #delete-keep").click();
    await page.locator(`#channel-table tr[data-id="${id}"]`).waitFor({ state: "detached" });
    expect((await seeded.api.json("GET", "/api/admin/channels")).items.some((c: { id: number }) => c.id === id)).toBe(false);
  });

  test("#channels: an S3 channel's secrets stay masked, and editing keeps them", async () => {
    const scratch = mkdtempSync(join(tmpdir(), "kura-console-s3-"));
    const s3 = await startS3({ directory: join(scratch, "s3"), buckets: ["console"] });
    try {
      await openPage(page, "channels");
      await page.locator("#channel-new").click();
      const dialog = page.locator("#channel-dialog");
      await dialog.locator("select[name=template]").selectOption("minio");
      await dialog.locator("input[name=channel_name]").fill("minio-备份");
      await dialog.locator("[data-key=endpoint] input").fill(s3.endpoint);
      await dialog.locator("[data-key=access_key_id] input").fill(TEST_CREDENTIALS.accessKeyId);
      await dialog.locator("[data-key=secret_access_key] input").fill(TEST_CREDENTIALS.secretAccessKey);
      await dialog.locator("[data-key=path] input").fill("console");
      await dialog.locator("button[type=submit]").click();
      const row = page.locator('#channel-table tr[data-name="minio-备份"]');
      await row.waitFor();
      const id = Number(await row.getAttribute("data-id"));

      await row.locator("button[data-action=edit]").click();
      const secret = dialog.locator("[data-key=secret_access_key] input");
      // The stored secret is never shown; the field says it is kept when left empty.
      expect(await secret.inputValue()).toBe("");
      expect(await dialog.locator("[data-key=secret_access_key]").textContent()).toContain("留空保持不变");
      expect(await dialog.innerHTML()).not.toContain(TEST_CREDENTIALS.secretAccessKey);
      // Same server under another name: the deep probe passes only with the kept credentials.
      const endpoint = s3.endpoint.replace("127.0.0.1", "localhost");
      await dialog.locator("[data-key=endpoint] input").fill(endpoint);
      await dialog.locator("#channel-test").click();
      expect(await channelTestResult(dialog)).toBe("连接成功：读写测试通过");
      await shot(page, "channels-edit-1440");
      await dialog.locator("button[type=submit]").click();
      await dialog.waitFor({ state: "detached" });
      const view = await seeded.api.json("GET", `/api/admin/channels/${id}/config`);
      expect(view.inputs).toMatchObject({ endpoint, secret_access_key: "__kura_secret_keep__", access_key_id: "__kura_secret_keep__" });
      expect((await seeded.api.json("POST", `/api/admin/channels/${id}/check`)).healthy).toBe(true);
      await seeded.api.json("DELETE", `/api/admin/channels/${id}?purge=false`, undefined, 204);
    } finally {
      // A failure with the dialog open would block every later test's clicks (the modal intercepts them).
      await page.keyboard.press("Escape").catch(() => {});
      await s3.stop().catch(() => {});
      rmSync(scratch, { recursive: true, force: true });
    }
  });

  test("#channels: OneDrive through the OAuth flow (authorise in a new window, token filled in, channel created)", async () => {
    // The provider must send the browser back to a fixed address: base_url.
    await seeded.api.json("PUT", "/api/admin/config", { base_url: base });
    await openPage(page, "channels");
    await page.locator("#channel-new").click();
    const dialog = page.locator("#channel-dialog");
    await fillOneDriveTemplate(dialog, "onedrive-网盘", onedrive);
    const [popup] = await Promise.all([page.context().waitForEvent("page"), dialog.locator("#oauth-start").click()]);
    // The provider consents at once and redirects to Kura's callback page.
    await popup.getByText("授权完成").waitFor();
    await popup.close();
    await dialog.getByText("已取得授权令牌").waitFor({ timeout: 15_000 });
    expect(JSON.parse(await dialog.locator("[data-key=token] textarea").inputValue()).refresh_token).toBeTruthy();
    await dialog.locator("button[type=submit]").click();
    const row = page.locator('#channel-table tr[data-name="onedrive-网盘"]');
    await row.waitFor();
    const id = Number(await row.getAttribute("data-id"));
    const view = await seeded.api.json("GET", `/api/admin/channels/${id}/config`);
    // drive_id (sensitive, as in rclone) is masked too; the export shows the one the provider gave.
    expect(view.inputs).toMatchObject({ token: "__kura_secret_keep__", drive_id: "__kura_secret_keep__" });
    expect(await (await seeded.api.request("GET", `/api/admin/channels/${id}/rclone-config`)).text()).toContain(`drive_id = ${onedrive.driveId}\n`);
    await seeded.api.json("DELETE", `/api/admin/channels/${id}?purge=false`, undefined, 204);
    await seeded.api.json("PUT", "/api/admin/config", { base_url: "" });
  });

  test("#settings: an invalid value shows the server's error on that field; leaving with edits asks first", async () => {
    await openPage(page, "settings");
    const field = page.locator("#settings-form .setting[data-key=max_upload_mb]");
    await field.locator("input").fill("0");
    await page.locator("#settings-form button[type=submit]").click();
    await field.locator(".field-error").filter({ hasText: "max_upload_mb" }).waitFor();
    expect(await field.getAttribute("class")).toContain("invalid");
    expect((await seeded.api.json("GET", "/api/admin/config/full")).settings.max_upload_mb).toBe(20);
    // Every runtime key has a field.
    expect(await page.locator("#settings-form .setting[data-key]").count()).toBe(38);
    await shot(page, "settings-1440");

    acceptDialogs = false;
    await page.locator("nav a[data-tab=users]").click();
    await page.waitForTimeout(200);
    expect(await page.locator("nav a.active").getAttribute("data-tab")).toBe("settings");
    acceptDialogs = true;
    await field.locator("input").fill("25");
    await page.locator("#settings-form button[type=submit]").click();
    await page.getByText("已保存 1 项").waitFor();
    expect((await seeded.api.json("GET", "/api/admin/config/full")).settings.max_upload_mb).toBe(25);
  });

  test("#users: edit a user's quota, then open their images", async () => {
    await openPage(page, "users");
    const row = page.locator('#user-table tr[data-name="alice"]');
    await row.getByRole("button", { name: "编辑" }).click();
    await page.locator("#user-edit-form input[name=edit_quota]").fill("5");
    await page.locator("#user-edit-form button[type=submit]").click();
    await row.getByText("5.0 MB").waitFor();
    const alice = (await seeded.api.json("GET", "/api/admin/users")).items.find((u: { name: string }) => u.name === "alice");
    expect(alice.quota_bytes).toBe(5 * 1024 * 1024);
    await shot(page, "users-1440");
    await row.getByRole("link", { name: "查看图片" }).click();
    await page.locator("#image-grid .empty").waitFor();
    expect(await page.locator("#image-filters select[name=owner]").inputValue()).toBe(alice.id);
  });

  test("#tokens: the S3 credential dialog gives everything an S3 client needs, and it works as shown", async () => {
    await openPage(page, "tokens");
    await page.locator("#token-form input[name=token_name]").fill("console-s3");
    await page.locator("#token-form button[type=submit]").click();
    await page.locator("#token-issued").waitFor();
    await page.locator("#token-issued").getByRole("button", { name: "关闭" }).click();
    await page.locator('#token-table tr[data-name="console-s3"]').getByRole("button", { name: "S3 凭据" }).click();
    const dialog = page.locator("#s3-credential");
    await dialog.waitFor();
    const field = (name: string) => dialog.locator(`[data-field="${name}"]`).inputValue();
    // Each field says in Chinese what it is, with the S3 term the client's own form uses.
    for (const label of ["端点（Endpoint）", "区域（Region）", "存储桶（Bucket）", "图片地址前缀"]) await dialog.getByText(label, { exact: true }).waitFor();
    const cred = {
      access_key_id: await field("Access Key ID"),
      secret_access_key: await field("secret_access_key"),
      endpoint: await field("endpoint"),
      region: await field("region"),
      bucket: await field("bucket"),
      url_prefix: await field("图片地址前缀"),
    };
    await dialog.getByRole("button", { name: "关闭" }).click();
    const client = new S3Client({
      endpoint: cred.endpoint,
      region: cred.region,
      forcePathStyle: true,
      credentials: { accessKeyId: cred.access_key_id, secretAccessKey: cred.secret_access_key },
      maxAttempts: 1,
    });
    const bytes = await makeJpeg(64, 48, 4242);
    await client.send(new PutObjectCommand({ Bucket: cred.bucket, Key: "console/s3.jpg", Body: bytes, ContentType: "image/jpeg" }));
    client.destroy();
    const served = await fetch(`${cred.url_prefix}console/s3.jpg`);
    expect(served.status).toBe(200);
    expect(Buffer.from(await served.arrayBuffer()).equals(bytes)).toBe(true);
  });

  test("#images: page through 60+ images and batch-delete a selection spanning pages", async () => {
    await openPage(page, "dashboard");
    await openPage(page, "images");
    await page.locator("#image-grid .tile").first().waitFor();
    const total = (await seeded.api.json("GET", "/api/admin/images")).total;
    expect(total).toBeGreaterThanOrEqual(BULK);
    expect(await page.locator("#image-count").textContent()).toContain(`共 ${total} 张`);
    const picked: string[] = [];
    for (const n of [1, 2, 3]) {
      if (n > 1) await page.locator(`#image-pager button[data-page="${n}"]`).click();
      await page.locator(`#image-pager button[data-page="${n}"][aria-current=page]`).waitFor();
      const tile = page.locator("#image-grid .tile").nth(n); // one from each page
      picked.push((await tile.getAttribute("data-id"))!);
      await tile.locator(".pick input").check();
    }
    await page.locator(`#image-pager button[data-page="1"]`).click();
    await page.locator(`#image-pager button[data-page="1"][aria-current=page]`).waitFor();
    // "Load more" appends page 2 by the API's cursor: 48 tiles, in the API's order, no repeats,
    // and the pager moves on to page 2 (its "next" is page 3).
    const firstTwo = [
      ...(await seeded.api.json("GET", "/api/admin/images?page=1&page_size=24")).items,
      ...(await seeded.api.json("GET", "/api/admin/images?page=2&page_size=24")).items,
    ].map((i: { id: string }) => i.id);
    const cursorRequests: string[] = [];
    page.on("request", (r) => {
      if (r.url().includes("/api/admin/images?") && r.url().includes("cursor=")) cursorRequests.push(r.url());
    });
    await page.locator("#image-more").click();
    await page.locator("#image-grid .tile").nth(47).waitFor();
    expect(await page.locator("#image-grid .tile").evaluateAll((tiles) => tiles.map((t) => (t as HTMLElement).dataset.id))).toEqual(firstTwo);
    expect(cursorRequests.length).toBe(1);
    expect(new URL(cursorRequests[0]!).searchParams.has("page")).toBe(false);
    await page.locator(`#image-pager button[data-page="2"][aria-current=page]`).waitFor();
    expect(await page.locator("#image-count").textContent()).toContain("已显示 48 张");
    // Picks stay ticked across the append; page numbers still work afterwards.
    expect(await page.locator(`.tile[data-id="${picked[0]}"] .pick input`).isChecked()).toBe(true);
    await page.locator(`#image-pager button[data-page="1"]`).click();
    await page.locator(`#image-pager button[data-page="1"][aria-current=page]`).waitFor();
    expect(await page.locator("#image-grid .tile").count()).toBe(24);
    // The selection survived paging: the first page's pick is still ticked.
    expect(await page.locator(`.tile[data-id="${picked[0]}"] .pick input`).isChecked()).toBe(true);
    expect(await page.locator("#selection-info").textContent()).toContain("已选 3 张");
    await shot(page, "images-1440");
    await page.locator("#delete-selected").click();
    await page.getByText("已删除 3 张").waitFor();
    for (const id of picked) expect((await seeded.api.request("GET", `/api/admin/images/${id}`)).status).toBe(404);
    expect((await seeded.api.json("GET", "/api/admin/images")).total).toBe(total - 3);
  });

  test("upload: status text follows progress, x/N counter, retry, results survive a tab switch", async () => {
    await openPage(page, "upload");
    // The drop zone shows keyboard focus (its file input is visually hidden inside it).
    await page.focus("#file-input");
    expect(await page.locator(".dropzone").evaluate((el) => getComputedStyle(el).outlineStyle)).toBe("solid");
    await page.locator("#file-input").setInputFiles([
      { name: "ok.jpg", mimeType: "image/jpeg", buffer: await makeJpeg(300, 200, 77) },
      { name: "broken.jpg", mimeType: "image/jpeg", buffer: Buffer.from("not an image at all") },
    ]);
    await page.locator("#upload-tally").filter({ hasText: "已完成 1 / 2，失败 1" }).waitFor();
    expect(await page.locator("#upload-results .result.ok .status").textContent()).toBe("完成");
    expect(await page.locator("#upload-results .result.failed .status").textContent()).toMatch(/^失败：/);
    expect(await page.locator("#upload-results .result.failed .retry").count()).toBe(1);
    expect(await page.locator("#copy-all").isEnabled()).toBe(true);
    await openPage(page, "tokens");
    await openPage(page, "upload");
    expect(await page.locator("#upload-results .result").count()).toBe(2);
    await page.locator("#upload-results .result.failed .retry").click();
    await page.locator("#upload-tally").filter({ hasText: "已完成 1 / 2，失败 1" }).waitFor();
    await shot(page, "upload-1440");
  });

  test("/api/docs renders the embedded openapi.yaml from Kura's own origin", async () => {
    const res = await fetch(`${base}/api/docs`);
    const csp = res.headers.get("content-security-policy") ?? "";
    expect(csp).toContain("script-src 'self'");
    expect(csp).not.toMatch(/https?:\/\//);
    const docs = await watchedPage(browser, base, DESKTOP, problems);
    const requests: string[] = [];
    docs.on("request", (r) => requests.push(r.url()));
    // The reference's bundle is a few MB of script: on two busy cores (CI runs the suite in parallel)
    // its parse alone can pass the page's 10 s navigation timeout, so only the rendered text is waited for.
    await docs.goto(`${base}/api/docs#tag/图片`, { waitUntil: "commit" });
    await docs.getByText("/api/admin/images", { exact: true }).first().waitFor({ timeout: 45_000 });
    await shot(docs, "api-docs-1440", { fullPage: false });
    expect(requests.filter((u) => !u.startsWith(base) && !u.startsWith("data:") && !u.startsWith("blob:"))).toEqual([]);
    expect(requests).toContain(`${base}/api/docs/standalone.js`);
    await docs.context().close();
  }, 90_000);

  test("a regular user lands on their own usage", async () => {
    const user = await watchedPage(browser, base, PHONE, problems);
    await loginAs(user, base, "alice", "alice-password-1");
    expect(await user.locator("nav a.active").getAttribute("data-tab")).toBe("dashboard");
    await user.locator("#my-usage").filter({ hasText: "配额 5.0 MB" }).waitFor();
    expect(await user.locator("nav a[data-tab]").allTextContents()).toEqual(["概览", "上传", "图片", "上传令牌"]);
    await shot(user, "user-dashboard-390");
    await user.context().close();
    expect(problems).toEqual([]);
  });
});
