import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { expectError, Session } from "../helpers/client";
import { listFiles } from "../helpers/files";
import { useAdmin } from "../helpers/fixture";
import { form, makeJpeg, makePng } from "../helpers/images";
import { queryDb, SENTINEL, waitFor, waitReplicaState } from "./channels.helpers";

const IMAGE_KEY = /^img\/[0-9a-f]{2}\/[0-9a-f]{2}\/[0-9a-f]{64}-[0-9a-f]{8}\.[a-z0-9]+$/;

describe("storage channel admin API (local channels)", () => {
  let scratch: string;
  const images: { id: string; size: number }[] = [];
  const dir = (name: string) => join(scratch, name);
  const createLocal = (name: string, extra: Record<string, unknown> = {}, path = dir(name)) =>
    admin.json("POST", "/api/admin/channels", { name, driver: "local", config: { path }, ...extra }, 201);
  const channelNames = async () => (await admin.json("GET", "/api/admin/channels")).items.map((c: { name: string }) => c.name);

  beforeAll(async () => {
    scratch = mkdtempSync(join(tmpdir(), "kura-channels-"));
  });
  const { server, admin } = useAdmin();
  beforeAll(async () => {
    for (const bytes of [await makeJpeg(40, 30, 11), await makePng(16, 16, 12)]) {
      const up = await admin.json("POST", "/api/admin/upload", form(bytes, "a.jpg"));
      images.push({ id: up.id, size: (await admin.json("GET", `/api/admin/images/${up.id}`)).size });
    }
  });
  afterAll(async () => {
    rmSync(scratch, { recursive: true, force: true });
  });

  test("templates list structure only, with path and public_base_url everywhere", async () => {
    const list = await admin.json("GET", "/api/admin/channel-templates");
    expect(list.total).toBe(list.items.length);
    const byId = new Map<string, any>(list.items.map((t: { id: string }) => [t.id, t]));
    for (const id of [
      "local",
      "aws_s3",
      "cloudflare_r2",
      "backblaze_b2",
      "minio",
      "aliyun_oss",
      "tencent_cos",
      "qiniu",
      "wasabi",
      "s3_other",
      "nextcloud",
      "owncloud",
      "webdav",
      "sftp",
      "onedrive",
      "drive",
      "dropbox",
    ]) {
      expect(byId.has(id)).toBe(true);
    }
    for (const t of list.items) {
      const keys = t.fields.map((f: { key: string }) => f.key);
      expect(keys).toContain("path");
      expect(keys).toContain("public_base_url");
      for (const f of t.fields) {
        expect(["text", "password", "bool", "select", "int"]).toContain(f.type);
        if (f.type === "select") expect(f.options.length).toBeGreaterThan(0);
        else expect(f.options).toEqual([]);
      }
      expect(t.requires_oauth).toBe(["onedrive", "drive", "dropbox"].includes(t.id));
    }
    expect(byId.get("cloudflare_r2").category).toBe("object_storage");
    expect(byId.get("cloudflare_r2").fields.map((f: { key: string }) => f.key)).toContain("account_id");
    expect(byId.get("aws_s3").fields.find((f: { key: string }) => f.key === "secret_access_key").type).toBe("password");
    for (const id of ["onedrive", "drive", "dropbox"]) {
      const keys = byId.get(id).fields.map((f: { key: string }) => f.key);
      expect(keys).toEqual(expect.arrayContaining(["client_id", "client_secret", "token"]));
    }
    expect(byId.get("onedrive").fields.map((f: { key: string }) => f.key)).toEqual(expect.arrayContaining(["drive_id", "drive_type"]));
    expect(byId.get("drive").fields.map((f: { key: string }) => f.key)).toContain("root_folder_id");
    // No labels or display names: structure only.
    expect(Object.keys(list.items[0]).sort()).toEqual(["category", "driver", "fields", "id", "requires_oauth"]);
  });

  test("channels are admin only", async () => {
    await admin.json("POST", "/api/admin/users", { name: "ursula", password: "password-1" }, 201);
    const user = new Session(server);
    await user.login("ursula", "password-1");
    await expectError(await user.request("GET", "/api/admin/channels"), 403);
    await expectError(await user.request("GET", "/api/admin/channel-templates"), 403);
    await expectError(await user.request("POST", "/api/admin/channels", { name: "x", driver: "local", config: { path: dir("x") } }), 403);
  });

  test("the channel holding the only copy of an image cannot be deleted", async () => {
    const [local] = (await admin.json("GET", "/api/admin/channels")).items;
    expect(local.name).toBe("local");
    expect(local.replicas.done).toBe(2);
    expect(await expectError(await admin.request("DELETE", `/api/admin/channels/${local.id}`), 409)).toMatch(/唯一/);
    expect(await expectError(await admin.request("DELETE", `/api/admin/channels/${local.id}?purge=false`), 409)).toMatch(/唯一/);
    expect(await channelNames()).toEqual(["local"]);
  });

  test("create (custom mode) probes, saves, and backfills existing images; audit keeps no secrets", async () => {
    const created = await createLocal("disk-a", { priority: 5 });
    expect(created).toMatchObject({
      name: "disk-a",
      driver: "local",
      priority: 5,
      healthy: true,
      encrypted: false,
      allow_direct_link: false,
      deleting: false,
      last_error: "",
    });
    expect(created.last_checked_at).not.toBe("");
    expect(created.replicas.done + created.replicas.pending).toBe(2);
    for (const image of images) await waitReplicaState(admin, image.id, created.id, "done");
    const files = listFiles(dir("disk-a"));
    expect(files.filter((f) => IMAGE_KEY.test(f))).toHaveLength(2);
    // The deep probe cleaned up after itself.
    expect(files.filter((f) => f.startsWith("_kura/"))).toEqual([]);
    const row = (await admin.json("GET", "/api/admin/channels")).items.find((c: { id: number }) => c.id === created.id);
    expect(row.replicas).toEqual({ done: 2, pending: 0, failed: 0 });
    const audits = queryDb<{ target: string; detail: string }>(server, "SELECT target, detail FROM audit WHERE action = 'channel.create'");
    expect(audits.map((a) => a.target)).toEqual([String(created.id)]);
    expect(JSON.parse(audits[0]!.detail)).toMatchObject({ name: "disk-a", driver: "local", config: { path: dir("disk-a") } });
  });

  test("list is ordered by priority descending and carries no config", async () => {
    await createLocal("disk-top", { priority: 10 });
    await createLocal("disk-low", { priority: -1 });
    const list = await admin.json("GET", "/api/admin/channels");
    expect(list.items.map((c: { name: string }) => c.name)).toEqual(["disk-top", "disk-a", "local", "disk-low"]);
    expect(list.items.map((c: { priority: number }) => c.priority)).toEqual([10, 5, 0, -1]);
    expect(list.total).toBe(4);
    expect(JSON.stringify(list)).not.toContain(scratch);
  });

  test("invalid creates are rejected and save nothing", async () => {
    const before = await channelNames();
    const bad = async (body: Record<string, unknown>, status = 400) => expectError(await admin.request("POST", "/api/admin/channels", body), status);
    await bad({ name: "x1", driver: "local", config: { path: dir("x1") }, colour: "red" });
    await bad({ name: "x2", driver: "local", config: { path: dir("x2") }, encrypted: true, allow_direct_link: true });
    await bad({ name: "x3", driver: "nosuch", config: {} });
    await bad({ name: "x4", template: "nosuch", inputs: {} });
    await bad({ name: "x5", template: "local", inputs: {} });
    await bad({ name: "x6", driver: "local", config: { path: SENTINEL } });
    await bad({ name: "x7", driver: "local", config: { path: dir("x7") }, auto_create_bucket: true });
    expect(await bad({ name: "disk-a", driver: "local", config: { path: dir("dup") } }, 409)).toMatch(/同名/);
    // A path below a regular file can never be a directory: the deep probe fails before anything is saved.
    writeFileSync(dir("plain-file"), "x");
    const reason = await bad({ name: "x8", driver: "local", config: { path: join(dir("plain-file"), "sub") } });
    expect(reason).toMatch(/探测失败/);
    expect(await channelNames()).toEqual(before);
  });

  test("a test of a path that does not exist yet leaves nothing behind; a save keeps the directory it made", async () => {
    const chain = join(dir("nested"), "a", "b");
    expect(await admin.json("POST", "/api/admin/channels/test", { driver: "local", config: { path: chain } })).toEqual({ ok: true });
    expect(existsSync(dir("nested"))).toBe(false);
    // A directory that was there stays, with whatever it held.
    mkdirSync(dir("kept"));
    writeFileSync(join(dir("kept"), "mine.txt"), "x");
    expect(await admin.json("POST", "/api/admin/channels/test", { driver: "local", config: { path: dir("kept") } })).toEqual({ ok: true });
    expect(existsSync(join(dir("kept"), "mine.txt"))).toBe(true);
    const saved = await createLocal("nested-disk", {}, chain);
    expect(existsSync(chain)).toBe(true);
    await admin.request("DELETE", `/api/admin/channels/${saved.id}?purge=false`);

    // A test and a save of one new path at once: the saved channel's directory stays, whichever ends first.
    for (let i = 0; i < 6; i++) {
      const path = join(dir("together"), String(i), "root");
      const [, created] = await Promise.all([
        admin.json("POST", "/api/admin/channels/test", { driver: "local", config: { path } }),
        createLocal(`together-${i}`, {}, path),
      ]);
      expect({ i, kept: existsSync(path) }).toEqual({ i, kept: true });
      await admin.request("DELETE", `/api/admin/channels/${created.id}?purge=false`);
    }
  });

  test("config view, template mode and PUT without config change", async () => {
    const created = await admin.json(
      "POST",
      "/api/admin/channels",
      { name: "tpl", template: "local", inputs: { path: dir("tpl"), public_base_url: "https://cdn.example.com/x" } },
      201,
    );
    const view = await admin.json("GET", `/api/admin/channels/${created.id}/config`);
    expect(view).toEqual({
      template: "local",
      driver: "local",
      config: { path: dir("tpl"), public_base_url: "https://cdn.example.com/x" },
      inputs: { path: dir("tpl"), public_base_url: "https://cdn.example.com/x" },
    });
    const put = await admin.json("PUT", `/api/admin/channels/${created.id}`, {
      name: "tpl-renamed",
      priority: 3,
      allow_direct_link: true,
      encrypted: false,
      template: "local",
      inputs: view.inputs,
    });
    expect(put).toMatchObject({ id: created.id, name: "tpl-renamed", priority: 3, allow_direct_link: true });
    await expectError(
      await admin.request("PUT", `/api/admin/channels/${created.id}`, {
        name: "tpl-renamed",
        priority: 3,
        allow_direct_link: true,
        encrypted: true,
        template: "local",
        inputs: view.inputs,
      }),
      409,
    );
    await expectError(
      await admin.request("PUT", `/api/admin/channels/${created.id}`, {
        name: "disk-a",
        priority: 3,
        allow_direct_link: true,
        template: "local",
        inputs: view.inputs,
      }),
      409,
    );
    await expectError(await admin.request("PUT", `/api/admin/channels/${created.id}`, { name: "tpl-renamed", template: "local", inputs: view.inputs }), 400);
    const custom = await admin.json(
      "GET",
      `/api/admin/channels/${(await admin.json("GET", "/api/admin/channels")).items.find((c: { name: string }) => c.name === "disk-a").id}/config`,
    );
    expect(custom).toEqual({ template: "", driver: "local", config: { path: dir("disk-a") } });
    await expectError(await admin.request("GET", "/api/admin/channels/999999/config"), 404);
  });

  test("rclone-config download: attachment, not cached, audited", async () => {
    const disk = (await admin.json("GET", "/api/admin/channels")).items.find((c: { name: string }) => c.name === "disk-a");
    const res = await admin.request("GET", `/api/admin/channels/${disk.id}/rclone-config`);
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toMatch(/^text\/plain/);
    expect(res.headers.get("content-disposition")).toBe(`attachment; filename="kura-${disk.id}.conf"`);
    expect(res.headers.get("cache-control")).toBe("no-store");
    const text = await res.text();
    expect(text.startsWith("#")).toBe(true);
    expect(text).toContain(`[kura-${disk.id}]\ntype = local\n`);
    const audits = queryDb<{ target: string }>(server, "SELECT target FROM audit WHERE action = 'channel.export'");
    expect(audits.map((a) => a.target)).toEqual([String(disk.id)]);
  });

  test("encrypted channels: default from encrypt_new_channels, no direct links, crypt remote exported", async () => {
    await admin.json("PUT", "/api/admin/config", { encrypt_new_channels: true });
    await expectError(
      await admin.request("POST", "/api/admin/channels", { name: "enc", driver: "local", config: { path: dir("enc") }, allow_direct_link: true }),
      400,
    );
    const enc = await createLocal("enc");
    await admin.json("PUT", "/api/admin/config", { encrypt_new_channels: false });
    expect(enc.encrypted).toBe(true);
    for (const image of images) await waitReplicaState(admin, image.id, enc.id, "done");
    const files = listFiles(dir("enc"));
    expect(files).toHaveLength(2);
    // Names are encrypted: nothing in Kura's plain key layout lands on an encrypted channel.
    expect(files.filter((f) => f.startsWith("img/"))).toEqual([]);
    const text = await (await admin.request("GET", `/api/admin/channels/${enc.id}/rclone-config`)).text();
    expect(text).toContain(`[kura-${enc.id}-crypt]`);
    await expectError(
      await admin.request("PUT", `/api/admin/channels/${enc.id}`, {
        name: "enc",
        priority: 0,
        allow_direct_link: false,
        encrypted: false,
        driver: "local",
        config: { path: dir("enc") },
      }),
      409,
    );
  });

  test("metrics count loaded channels and bytes of done replicas", async () => {
    const text = await (await fetch(server.url("/metrics"))).text();
    const list = (await admin.json("GET", "/api/admin/channels")).items;
    const value = (line: string) =>
      Number(
        text
          .split("\n")
          .find((l) => l.startsWith(`${line} `))
          ?.slice(line.length + 1),
      );
    expect(value("kura_channels_total")).toBe(list.length);
    expect(value("kura_channels_healthy_total")).toBe(list.filter((c: { healthy: boolean }) => c.healthy).length);
    expect(value('kura_channel_storage_bytes{channel="disk-a"}')).toBe(images.reduce((n, i) => n + i.size, 0));
  });

  test("delete with purge=false removes the channel at once and leaves its objects", async () => {
    const low = (await admin.json("GET", "/api/admin/channels")).items.find((c: { name: string }) => c.name === "disk-low");
    for (const image of images) await waitReplicaState(admin, image.id, low.id, "done");
    await expectError(await admin.request("DELETE", `/api/admin/channels/${low.id}?purge=maybe`), 400);
    await admin.json("DELETE", `/api/admin/channels/${low.id}?purge=false`, undefined, 204);
    expect(await channelNames()).not.toContain("disk-low");
    expect(listFiles(dir("disk-low")).filter((f) => IMAGE_KEY.test(f))).toHaveLength(2);
    await expectError(await admin.request("DELETE", `/api/admin/channels/${low.id}`), 404);
    // The image details no longer list it.
    const detail = await admin.json("GET", `/api/admin/images/${images[0]!.id}`);
    expect(detail.replicas.map((r: { channel_id: number }) => r.channel_id)).not.toContain(low.id);
  });

  test("delete with purge drains only this service's objects, then the channel disappears", async () => {
    const top = (await admin.json("GET", "/api/admin/channels")).items.find((c: { name: string }) => c.name === "disk-top");
    for (const image of images) await waitReplicaState(admin, image.id, top.id, "done");
    const root = dir("disk-top");
    // Foreign objects: one in our key format but of no known blob, one elsewhere; and a snapshot of ours.
    const foreignLookalike = `img/00/11/${"0".repeat(64)}-deadbeef.jpg`;
    mkdirSync(join(root, "img/00/11"), { recursive: true });
    writeFileSync(join(root, foreignLookalike), "not ours");
    mkdirSync(join(root, "photos"), { recursive: true });
    writeFileSync(join(root, "photos/holiday.jpg"), "not ours either");
    mkdirSync(join(root, "_kura/backups"), { recursive: true });
    writeFileSync(join(root, "_kura/backups/kura-20260101-000000.000.db"), "snapshot");

    await admin.json("DELETE", `/api/admin/channels/${top.id}`, undefined, 202);
    await waitFor(channelNames, (names) => !names.includes("disk-top"), 15_000, "drained channel to disappear");
    expect(listFiles(root).sort()).toEqual([foreignLookalike, "photos/holiday.jpg"].sort());
    await server.waitForLog(/msg=存储渠道已清空并移除 channel=disk-top objects=2 system_objects=1/);
    // Images are still readable from the remaining channels.
    expect((await fetch(server.url(`/i/${images[0]!.id}`))).status).toBe(200);
  });
});
