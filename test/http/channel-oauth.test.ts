/**
 * OAuth channels end to end, black box: a real Kura process whose OneDrive API
 * origin points at a local fake (KURA_OAUTH_API_BASE_ONEDRIVE), the fake's
 * /authorize and /token given as the channel's auth_url / token_url. The test
 * plays the browser: start → provider consent → our callback → result; then a
 * channel is created with that token, images replicate to the fake, and token
 * refresh follows spec 4.7 rule 8.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { FakeDrive } from "../channels/fakes/drive";
import { FakeDropbox } from "../channels/fakes/dropbox";
import { FakeOnedrive } from "../channels/fakes/onedrive";
import { expectError } from "../helpers/client";
import { useAdmin } from "../helpers/fixture";
import { form, makeJpeg } from "../helpers/images";
import { SENTINEL, waitReplicaState } from "./channels.helpers";

const fake = new FakeOnedrive();
const gdrive = new FakeDrive();
const dropbox = new FakeDropbox();

describe("OAuth channels (OneDrive against a local fake)", () => {
  let callback: string;
  /** The token obtained through the flow. */
  let token = "";
  let channelId = 0;
  const app = () => ({
    client_id: fake.oauth.clientId,
    client_secret: fake.oauth.clientSecret,
    auth_url: `${fake.origin}/authorize`,
    token_url: `${fake.origin}/token`,
  });

  async function exportedToken(): Promise<Record<string, string>> {
    const text = await (await admin.request("GET", `/api/admin/channels/${channelId}/rclone-config`)).text();
    return JSON.parse(/^token = (.*)$/m.exec(text)![1]!);
  }

  const { server, admin } = useAdmin(() => ({
    env: { KURA_OAUTH_API_BASE_ONEDRIVE: fake.origin, KURA_OAUTH_API_BASE_DRIVE: gdrive.origin, KURA_OAUTH_API_BASE_DROPBOX: dropbox.origin },
  }));
  beforeAll(async () => {
    callback = server.url("/api/admin/channel-oauth/callback");
  });
  afterAll(async () => {
    fake.stop();
    gdrive.stop();
    dropbox.stop();
  });

  test("start needs base_url, an OAuth template and the app's client_id", async () => {
    const start = (body: unknown) => admin.request("POST", "/api/admin/channel-oauth/start", body);
    expect(await expectError(await start({ template: "onedrive", inputs: app() }), 400)).toContain("base_url");
    await admin.json("PUT", "/api/admin/config", { base_url: server.base });
    expect(await expectError(await start({ template: "local", inputs: {} }), 400)).toContain("不需要授权");
    expect(await expectError(await start({ template: "onedrive", inputs: { ...app(), client_id: "" } }), 400)).toContain("client_id");
    await expectError(await start({ template: "onedrive", inputs: { nosuch: "x" } }), 400);
    await expectError(await start({ template: "onedrive", inputs: { ...app(), client_id: SENTINEL } }), 400);
    await expectError(await start({ template: "onedrive", inputs: app(), colour: "red" }), 400);
    await expectError(await admin.request("POST", "/api/admin/channel-oauth/start", { template: "onedrive", inputs: app() }, { "x-csrf-token": "wrong" }), 403);
  });

  test("start → consent → callback page without the token → result once", async () => {
    const started = await admin.json("POST", "/api/admin/channel-oauth/start", { template: "onedrive", inputs: { ...app(), token: "ignored" } });
    const url = new URL(started.auth_url);
    expect(`${url.origin}${url.pathname}`).toBe(`${fake.origin}/authorize`);
    expect(url.searchParams.get("state")).toBe(started.state);
    expect(url.searchParams.get("redirect_uri")).toBe(callback);
    expect(url.searchParams.get("client_id")).toBe(fake.oauth.clientId);
    expect(url.searchParams.get("scope")?.split(" ")).toContain("offline_access");
    expect(url.searchParams.get("code_challenge_method")).toBe("S256");
    expect(await admin.json("GET", `/api/admin/channel-oauth/result?state=${started.state}`)).toEqual({ pending: true });

    // The callback belongs to the admin session: without the cookie nothing happens (and the state survives).
    const atProvider = await fetch(started.auth_url, { redirect: "manual" });
    await expectError(await fetch(atProvider.headers.get("location")!, { redirect: "manual" }), 401);
    const page = await fetch(atProvider.headers.get("location")!, { headers: { cookie: admin.cookie }, redirect: "manual" });
    expect(page.status).toBe(200);
    expect(page.headers.get("content-type")).toMatch(/^text\/html/);
    expect(page.headers.get("referrer-policy")).toBe("no-referrer");
    const html = await page.text();
    expect(html).toContain("授权完成");

    const result = await admin.json("GET", `/api/admin/channel-oauth/result?state=${started.state}`);
    expect(result.pending).toBe(false);
    token = result.token;
    const parsed = JSON.parse(token);
    expect(Object.keys(parsed)).toEqual(["access_token", "token_type", "refresh_token", "expiry"]);
    expect(parsed.expiry).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$/);
    for (const secret of [parsed.access_token, parsed.refresh_token]) expect(html).not.toContain(secret);
    // Taken once; the state is spent.
    await expectError(await admin.request("GET", `/api/admin/channel-oauth/result?state=${started.state}`), 404);
    await expectError(await fetch(atProvider.headers.get("location")!, { headers: { cookie: admin.cookie } }), 400);
    await expectError(await admin.request("GET", "/api/admin/channel-oauth/result"), 400);
  });

  test("a refused consent is reported by the page and the result", async () => {
    const started = await admin.json("POST", "/api/admin/channel-oauth/start", { template: "onedrive", inputs: app() });
    const page = await fetch(`${callback}?state=${started.state}&error=access_denied`, { headers: { cookie: admin.cookie } });
    expect(page.status).toBe(200);
    expect(await page.text()).toContain("授权失败");
    const result = await admin.json("GET", `/api/admin/channel-oauth/result?state=${started.state}`);
    expect(result).toEqual({ pending: false, error: expect.stringContaining("access_denied") });
  });

  test("create completes drive_id from the provider (a provider failure is 400) and replicates images to it", async () => {
    const body = { name: "od", template: "onedrive", inputs: { ...app(), token, path: "kura" } };
    fake.failMeDrive = true;
    expect(await expectError(await admin.request("POST", "/api/admin/channels", body), 400)).toMatch(/查询.*失败/);
    fake.failMeDrive = false;
    expect((await admin.json("GET", "/api/admin/channels")).items.map((c: { name: string }) => c.name)).not.toContain("od");

    const created = await admin.json("POST", "/api/admin/channels", body, 201);
    channelId = created.id;
    const view = await admin.json("GET", `/api/admin/channels/${channelId}/config`);
    // drive_id is sensitive in rclone's onedrive backend: masked here; the export shows what was filled in.
    expect(view.inputs).toMatchObject({ drive_id: SENTINEL, drive_type: "personal", token: SENTINEL, client_secret: SENTINEL, client_id: SENTINEL });
    expect(view.config).toMatchObject({ drive_id: SENTINEL, token: SENTINEL });
    expect(await (await admin.request("GET", `/api/admin/channels/${channelId}/rclone-config`)).text()).toContain(`drive_id = ${fake.driveId}\n`);

    const up = await admin.json("POST", "/api/admin/upload", form(await makeJpeg(32, 24, 5), "a.jpg"));
    await waitReplicaState(admin, up.id, channelId, "done");
    const stored = [...fake.files.keys()].filter((k) => k.startsWith("kura/img/"));
    expect(stored).toHaveLength(1);
    expect([...fake.files.keys()].filter((k) => k.startsWith("kura/_kura/"))).toEqual([]);
  });

  test("test with the stored token (sentinel): an expired token is refreshed and written back, not returned", async () => {
    const before = await exportedToken();
    fake.oauth.expireAccessTokens();
    const view = await admin.json("GET", `/api/admin/channels/${channelId}/config`);
    const result = await admin.json("POST", "/api/admin/channels/test", { channel_id: channelId, template: "onedrive", inputs: view.inputs });
    expect(result).toEqual({ ok: true });
    const after = await exportedToken();
    expect(after.access_token).not.toBe(before.access_token);
    // The fake rotates refresh tokens: the stored one must be the new one.
    expect(fake.oauth.isValidRefreshToken(after.refresh_token!)).toBe(true);
    // The live channel uses the stored token: a new image replicates.
    const up = await admin.json("POST", "/api/admin/upload", form(await makeJpeg(30, 20, 6), "b.jpg"));
    await waitReplicaState(admin, up.id, channelId, "done");
  });

  test("test with a newly submitted token: the refreshed token is returned, also when the probe fails", async () => {
    const fresh = fake.oauth.tokenJson();
    fake.oauth.expireAccessTokens();
    const inputs = { ...app(), token: fresh, drive_id: fake.driveId, path: "kura-test" };
    const ok = await admin.json("POST", "/api/admin/channels/test", { template: "onedrive", inputs });
    expect(ok.ok).toBe(true);
    expect(JSON.parse(ok.token).access_token).not.toBe(JSON.parse(fresh).access_token);
    expect(fake.oauth.isValidRefreshToken(JSON.parse(ok.token).refresh_token)).toBe(true);

    fake.oauth.expireAccessTokens();
    const failed = await admin.json("POST", "/api/admin/channels/test", {
      template: "onedrive",
      inputs: { ...inputs, token: ok.token, drive_id: "no-such-drive" },
    });
    expect(failed.ok).toBe(false);
    expect(failed.error).toMatch(/[\u4e00-\u9fff]/);
    expect(typeof failed.token).toBe("string");
    for (const t of [ok.token, failed.token]) {
      const parsed = JSON.parse(t);
      expect(failed.error).not.toContain(parsed.access_token);
      expect(failed.error).not.toContain(parsed.refresh_token);
    }
  });

  test("the live channel refreshes a rejected token itself and seals the new one into the channel", async () => {
    const before = await exportedToken();
    fake.oauth.expireAccessTokens();
    const up = await admin.json("POST", "/api/admin/upload", form(await makeJpeg(28, 20, 7), "c.jpg"));
    await waitReplicaState(admin, up.id, channelId, "done");
    const after = await exportedToken();
    expect(after.access_token).not.toBe(before.access_token);
    expect(fake.oauth.isValidRefreshToken(after.refresh_token!)).toBe(true);
    await server.waitForLog(/OAuth 令牌已刷新并保存/);
    expect(server.logs).not.toContain(after.access_token!);
  });

  test("Google Drive (custom mode) gets root_folder_id filled in; Dropbox (template) needs nothing more", async () => {
    const appOf = (f: FakeDrive | FakeDropbox) => ({
      client_id: f.oauth.clientId,
      client_secret: f.oauth.clientSecret,
      token: f.oauth.tokenJson(),
      token_url: `${f.origin}/token`,
    });
    const gd = await admin.json("POST", "/api/admin/channels", { name: "gd", driver: "drive", config: { ...appOf(gdrive), path: "kura" } }, 201);
    // root_folder_id is sensitive in rclone's drive backend: masked; the export shows the id filled in.
    expect((await admin.json("GET", `/api/admin/channels/${gd.id}/config`)).config.root_folder_id).toBe(SENTINEL);
    expect(await (await admin.request("GET", `/api/admin/channels/${gd.id}/rclone-config`)).text()).toContain(`root_folder_id = ${gdrive.rootId}\n`);
    const db = await admin.json("POST", "/api/admin/channels", { name: "db", template: "dropbox", inputs: { ...appOf(dropbox), path: "kura" } }, 201);
    expect(Object.keys((await admin.json("GET", `/api/admin/channels/${db.id}/config`)).config).sort()).toEqual([
      "client_id",
      "client_secret",
      "path",
      "token",
      "token_url",
    ]);
    // Both received the backfill of the images uploaded so far.
    const image = (await admin.json("GET", "/api/admin/images")).items[0];
    await waitReplicaState(admin, image.id, gd.id, "done");
    await waitReplicaState(admin, image.id, db.id, "done");
    expect([...gdrive.files.values()].some((f) => !f.trashed && gdrive.pathOf(f).startsWith("kura/img/"))).toBe(true);
    expect([...dropbox.files.keys()].some((k) => k.startsWith("/kura/img/"))).toBe(true);
  });

  test("rclone export: type onedrive, rclone's token JSON, drive_id/drive_type, app credentials, no Kura-only keys", async () => {
    const text = await (await admin.request("GET", `/api/admin/channels/${channelId}/rclone-config`)).text();
    const section = text.slice(text.indexOf(`[kura-${channelId}]`));
    const keys = [...section.matchAll(/^([a-z_]+) = /gm)].map((m) => m[1]);
    expect(section).toContain("type = onedrive\n");
    expect(keys.sort()).toEqual(["auth_url", "client_id", "client_secret", "drive_id", "drive_type", "token", "token_url", "type"]);
    expect(section).toContain(`drive_id = ${fake.driveId}\n`);
    expect(section).toContain(`client_secret = ${fake.oauth.clientSecret}\n`);
    const exported = JSON.parse(/^token = (.*)$/m.exec(section)![1]!);
    expect(Object.keys(exported)).toEqual(["access_token", "token_type", "refresh_token", "expiry"]);
    expect(text).not.toContain("KURA_OAUTH_API_BASE");
  });
});
