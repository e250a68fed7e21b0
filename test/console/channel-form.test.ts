// The storage channel dialog in a real headless Chromium (console audit gaps 2 and 5): a token the
// "测试连接" probe refreshed replaces the one in the form, so the save does not store a token the
// provider has already retired (a local OneDrive fake that rotates refresh tokens, as Microsoft
// does); and a custom channel (rclone backend + parameters, no template) can be created, not only
// edited. Each outcome is read back through the HTTP API.
import { afterAll, beforeAll, expect, test } from "bun:test";
import type { Browser, Locator, Page } from "playwright-core";
import { FakeOnedrive } from "../channels/fakes/onedrive";
import { adminSession, type Session } from "../helpers/client";
import { KuraServer } from "../helpers/server";
import { ADMIN_PASSWORD, DESKTOP, fillOneDriveTemplate, loginAs, openPage, sharedBrowser, watchedPage } from "./harness";

const onedrive = new FakeOnedrive();
let server: KuraServer;
let admin: Session;
let browser: Browser;
let page: Page;
const problems: string[] = [];

beforeAll(async () => {
  [server, browser] = await Promise.all([KuraServer.start({ env: { KURA_OAUTH_API_BASE_ONEDRIVE: onedrive.origin } }), sharedBrowser()]);
  admin = await adminSession(server, ADMIN_PASSWORD);
  page = await watchedPage(browser, server.base, DESKTOP, problems);
  await loginAs(page, server.base, "admin", ADMIN_PASSWORD);
}, 60_000);

afterAll(async () => {
  await page?.context().close();
  await server?.dispose();
  onedrive.stop();
});

/** The dialog's probe result once it has finished (ok or failed). */
async function testResult(dialog: Locator): Promise<string> {
  const finished = dialog.locator("#channel-test-result.ok-text, #channel-test-result.bad-text");
  await finished.waitFor();
  return (await finished.textContent()) ?? "";
}

async function newChannelDialog(): Promise<Locator> {
  await openPage(page, "channels");
  await page.locator("#channel-table tr[data-id]").first().waitFor();
  await page.locator("#channel-new").click();
  return page.locator("#channel-dialog");
}

test("a token refreshed by 测试连接 goes into the form and is what the save stores", async () => {
  const dialog = await newChannelDialog();
  try {
    await fillOneDriveTemplate(dialog, "onedrive-刷新", onedrive);
    // A pasted token whose access token has expired: the probe must refresh it, and OneDrive
    // retires the old refresh token when it does.
    const pasted = onedrive.oauth.tokenJson();
    onedrive.oauth.expireAccessTokens();
    const tokenField = dialog.locator("[data-key=token] textarea");
    await tokenField.fill(pasted);
    await dialog.locator("#channel-test").click();
    expect(await testResult(dialog)).toBe("连接成功：读写测试通过（授权令牌已刷新并填入表单，保存时一并保存）");
    const refreshed = JSON.parse(await tokenField.inputValue());
    expect(refreshed.refresh_token).not.toBe(JSON.parse(pasted).refresh_token);
    expect(onedrive.oauth.isValidRefreshToken(JSON.parse(pasted).refresh_token)).toBe(false);
    expect(onedrive.oauth.isValidRefreshToken(refreshed.refresh_token)).toBe(true);

    // The save sends the refreshed token: the stale one would no longer refresh and the create would fail.
    await dialog.locator("button[type=submit]").click();
    const row = page.locator('#channel-table tr[data-name="onedrive-刷新"]');
    await row.waitFor();
    const id = Number(await row.getAttribute("data-id"));
    const exported = await (await admin.request("GET", `/api/admin/channels/${id}/rclone-config`)).text();
    expect(onedrive.oauth.isValidRefreshToken(JSON.parse(/^token = (.*)$/m.exec(exported)![1]!).refresh_token)).toBe(true);
    expect((await admin.json("POST", `/api/admin/channels/${id}/check`)).healthy).toBe(true);
    await admin.json("DELETE", `/api/admin/channels/${id}?purge=false`, undefined, 204);
  } finally {
    // A failure with the dialog open would block the next test's clicks.
    await page.keyboard.press("Escape").catch(() => {});
  }
});

test("creates a custom channel (local backend + parameters, no template) that passes its check", async () => {
  const dir = `${server.dataDir}/custom-disk`;
  const dialog = await newChannelDialog();
  try {
    await dialog.locator("select[name=template]").selectOption({ label: "自定义（rclone 驱动与配置）" });
    await dialog.locator("input[name=channel_name]").fill("自定义盘");
    await dialog.locator("select[name=custom_driver]").selectOption("local");
    await dialog.locator("textarea[name=custom_config]").fill(`path = ${dir}`);
    await dialog.locator("#channel-test").click();
    expect(await testResult(dialog)).toBe("连接成功：读写测试通过");
    await dialog.locator("button[type=submit]").click();
    const row = page.locator('#channel-table tr[data-name="自定义盘"]');
    await row.waitFor();
    const id = Number(await row.getAttribute("data-id"));
    expect(await admin.json("GET", `/api/admin/channels/${id}/config`)).toEqual({ template: "", driver: "local", config: { path: dir } });

    await row.locator("button[data-action=check]").click();
    await page.getByText("自定义盘：探测成功").waitFor();
    expect((await admin.json("GET", "/api/admin/channels")).items.find((c: { id: number }) => c.id === id).healthy).toBe(true);

    // Editing it shows the backend (fixed) and its parameters.
    await row.locator("button[data-action=edit]").click();
    expect(await dialog.locator("select[name=template] option:checked").textContent()).toBe("自定义（local）");
    expect(await dialog.locator("select[name=custom_driver]").isDisabled()).toBe(true);
    expect(await dialog.locator("textarea[name=custom_config]").inputValue()).toBe(`path = ${dir}`);
  } finally {
    await page.keyboard.press("Escape").catch(() => {});
  }
  expect(problems).toEqual([]);
});
