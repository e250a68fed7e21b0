import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { adminSession, expectError, Session } from "../helpers/client";
import { useAdmin } from "../helpers/fixture";
import { KuraServer } from "../helpers/server";

describe("alerts and audit log", () => {
  let dir: string;
  const { server, admin } = useAdmin();
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), "kura-ops-"));
  });
  afterAll(async () => {
    rmSync(dir, { recursive: true, force: true });
    rmSync(`${dir}.away`, { recursive: true, force: true });
  });

  test("an unhealthy channel shows an open alert; after recovery it is resolved and listed under status=all", async () => {
    const ch = await admin.json("POST", "/api/admin/channels", { name: "shaky", driver: "local", config: { path: dir } }, 201);
    expect((await admin.json("GET", "/api/admin/alerts")).items).toEqual([]);
    renameSync(dir, `${dir}.away`);
    writeFileSync(dir, "not a directory");
    await admin.json("POST", `/api/admin/channels/${ch.id}/check`);
    const open = await admin.json("GET", "/api/admin/alerts");
    expect(open.total).toBe(1);
    expect(open.items[0]).toMatchObject({ kind: "channel_unhealthy", target: "shaky", resolved_at: "" });
    expect(open.items[0].message).toMatch(/[\u4e00-\u9fff]/);

    rmSync(dir);
    renameSync(`${dir}.away`, dir);
    await admin.json("POST", `/api/admin/channels/${ch.id}/check`);
    expect((await admin.json("GET", "/api/admin/alerts")).items).toEqual([]);
    const all = await admin.json("GET", "/api/admin/alerts?status=all&page_size=1");
    expect(all.total).toBe(1);
    expect(all.items[0].resolved_at).toMatch(/^\d{4}-\d{2}-\d{2} /);
    await expectError(await admin.request("GET", "/api/admin/alerts?status=open"), 400);
  });

  test("the audit log pages newest first and filters by actor, action, target and time", async () => {
    const created = await admin.json("POST", "/api/admin/users", { name: "audited", password: "password-1" }, 201);
    await admin.json("PUT", "/api/admin/config", { cdn_provider_api_token: "very-secret-token-value" });
    const byAction = await admin.json("GET", "/api/admin/audit?action=user.create");
    expect(byAction.items.map((e: { target: string }) => e.target)).toContain(created.id);
    expect(byAction.items.every((e: { action: string }) => e.action === "user.create")).toBe(true);
    expect((await admin.json("GET", `/api/admin/audit?target=${created.id}`)).total).toBe(1);
    const mine = await admin.json("GET", "/api/admin/audit?actor=default&page_size=2");
    expect(mine.items).toHaveLength(2);
    expect(mine.total).toBeGreaterThan(2);
    expect(mine.items[0].id).toBeGreaterThan(mine.items[1].id);
    const config = await admin.json("GET", "/api/admin/audit?action=config.update");
    expect(JSON.stringify(config.items)).not.toContain("very-secret-token-value");
    expect((await admin.json("GET", "/api/admin/audit?until=2000-01-01%2000:00:00")).total).toBe(0);
    await expectError(await admin.request("GET", "/api/admin/audit?since=yesterday"), 400);
  });

  test("regular users cannot read alerts or the audit log", async () => {
    await admin.json("POST", "/api/admin/users", { name: "nosy", password: "password-1" }, 201);
    const s = new Session(server);
    await s.login("nosy", "password-1");
    await expectError(await s.request("GET", "/api/admin/alerts"), 403);
    await expectError(await s.request("GET", "/api/admin/audit"), 403);
  });
});

describe("dashboard", () => {
  test("admins get the site overview with channels, users their own usage", async () => {
    const { form, makePng } = await import("../helpers/images");
    const server = await KuraServer.start({ env: { KURA_TRUSTED_PROXIES: undefined } });
    try {
      const admin = await adminSession(server);
      const a = await admin.json("POST", "/api/admin/upload", form(await makePng(20, 20, 1), "a.png"));
      await admin.json("PUT", "/api/admin/config", { activity_flush_seconds: 1 });
      for (let i = 0; i < 3; i++) await (await fetch(server.url(`/i/${a.id}`))).arrayBuffer();
      await admin.json("POST", "/api/admin/users", { name: "dash", password: "password-1", quota_bytes: 5000 }, 201);
      const user = new Session(server);
      await user.login("dash", "password-1");
      await user.json("POST", "/api/admin/upload", form(await makePng(10, 10, 2), "b.png"));

      let overview = await admin.json("GET", "/api/admin/dashboard");
      const deadline = Date.now() + 5000;
      while (overview.total_accesses < 3 && Date.now() < deadline) {
        await Bun.sleep(200);
        overview = await admin.json("GET", "/api/admin/dashboard");
      }
      expect(overview).toMatchObject({ images: 2, users: 2, total_accesses: 3, offsite_missing: true, pending_dedup: 0 });
      expect(overview.top_images[0]).toMatchObject({ id: a.id, url: `/i/${a.id}`, access_count: 3 });
      expect(overview.traffic_estimate_bytes).toBe(3 * overview.top_images[0].size);
      expect(overview.channels).toEqual([expect.objectContaining({ name: "local", driver: "local", healthy: true })]);
      expect(overview.channels[0].bytes).toBe(overview.storage_bytes);
      const perUser = Object.fromEntries(overview.per_user.map((u: { name: string }) => [u.name, u]));
      expect(perUser.admin).toMatchObject({ images: 1, total_accesses: 3, traffic_estimate_bytes: overview.traffic_estimate_bytes });
      expect(perUser.dash).toMatchObject({ images: 1, total_accesses: 0, traffic_estimate_bytes: 0 });
      expect(perUser.admin.storage_bytes + perUser.dash.storage_bytes).toBe(overview.storage_bytes);

      const mine = await user.json("GET", "/api/admin/dashboard");
      expect(mine.channels).toBeUndefined();
      expect(mine).toMatchObject({ images: 1, quota_bytes: 5000, total_accesses: 0 });
      expect(mine.top_images.map((t: { file_name: string }) => t.file_name)).toEqual(["b.png"]);
    } finally {
      await server.dispose();
    }
  });
});

describe("metadata export", () => {
  test("an attachment with every table's records and no credential material", async () => {
    const { form, makePng } = await import("../helpers/images");
    const { assertMatchesSpec } = await import("../helpers/openapi");
    const server = await KuraServer.start();
    try {
      const admin = await adminSession(server);
      const token = await admin.json("POST", "/api/admin/tokens", { name: "exported", expires_in_hours: 48 }, 201);
      const up = await admin.json("POST", "/api/admin/upload", form(await makePng(12, 12, 7), "e.png"));
      const res = await admin.request("GET", "/api/admin/export");
      expect(res.status).toBe(200);
      expect(res.headers.get("content-disposition")).toMatch(/^attachment; filename="kura-export-\d{8}T\d{6}\.json"$/);
      expect(res.headers.get("cache-control")).toBe("no-store");
      const text = await res.text();
      const data = JSON.parse(text);
      assertMatchesSpec("GET", "/api/admin/export", 200, data);
      expect(data.users.map((u: { name: string }) => u.name)).toContain("admin");
      expect(data.tokens).toEqual([expect.objectContaining({ id: token.id, user_id: "default", name: "exported", prefix: token.prefix })]);
      // The whole list item (spec 2.4): an expiring token does not read as permanent.
      const listed = (await admin.json("GET", "/api/admin/tokens")).items.find((t: { id: number }) => t.id === token.id);
      expect(listed.expires_at).not.toBeNull();
      expect(data.tokens[0].expires_at).toBe(listed.expires_at);
      expect(data.images).toEqual([expect.objectContaining({ id: up.id, file_name: "e.png", object_key: null })]);
      expect(data.blobs).toHaveLength(1);
      expect(data.blob_channels).toEqual([expect.objectContaining({ state: "done" })]);
      expect(data.channels[0]).toMatchObject({ name: "local", driver: "local" });
      // No secrets: no token plaintext or hash, no password hash, no sealed channel config.
      expect(text).not.toContain(token.token);
      expect(text).not.toContain("$argon2id$");
      expect(text).not.toContain("secret_hash");
      expect(text).not.toContain("config_sealed");
      const audit = await admin.json("GET", "/api/admin/audit?action=metadata.export");
      expect(audit.total).toBe(1);
      await admin.json("POST", "/api/admin/users", { name: "plainuser", password: "password-1" }, 201);
      const user = new Session(server);
      await user.login("plainuser", "password-1");
      await expectError(await user.request("GET", "/api/admin/export"), 403);
    } finally {
      await server.dispose();
    }
  });
});
