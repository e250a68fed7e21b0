import { Database } from "bun:sqlite";
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { existsSync, mkdtempSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { adminSession, expectError, Session } from "../helpers/client";
import { useAdmin } from "../helpers/fixture";
import { KuraServer } from "../helpers/server";

const NAME = /^kura-\d{8}-\d{6}\.\d{3}\.db$/;

const snapshotsIn = (root: string) =>
  existsSync(join(root, "_kura/backups"))
    ? readdirSync(join(root, "_kura/backups"))
        .filter((f) => NAME.test(f))
        .sort()
    : [];

describe("metadata backups on two local channels", () => {
  let second: string;
  let defaultRoot: string;
  const { server, admin } = useAdmin();
  beforeAll(async () => {
    second = mkdtempSync(join(tmpdir(), "kura-backup-"));
    defaultRoot = join(server.dataDir, "storage");
    await admin.json("POST", "/api/admin/channels", { name: "second", driver: "local", config: { path: second }, priority: 10 }, 201);
  });
  afterAll(async () => {
    rmSync(second, { recursive: true, force: true });
    rmSync(`${second}.away`, { recursive: true, force: true });
  });

  test("a snapshot is written to every channel, listed with its holders and downloadable as SQLite", async () => {
    const snap = await admin.json("POST", "/api/admin/backups", undefined, 201);
    expect(snap.name).toMatch(NAME);
    expect(snap.channels).toEqual(["second", "local"]);
    expect(new Date(snap.taken_at).toISOString()).toBe(snap.taken_at);
    for (const root of [second, defaultRoot]) {
      expect(snapshotsIn(root)).toContain(snap.name);
      expect(readFileSync(join(root, "_kura/backups", snap.name)).length).toBe(snap.size);
    }
    await server.waitForLog(new RegExp(`channel=second key=_kura/backups/${snap.name.replaceAll(".", "\\.")} bytes=${snap.size}`));

    const list = await admin.json("GET", "/api/admin/backups");
    expect(list.items.find((i: { name: string }) => i.name === snap.name)).toEqual(snap);
    expect(list.total).toBe(list.items.length);

    const res = await admin.request("GET", `/api/admin/backups/${snap.name}`);
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toBe("application/vnd.sqlite3");
    expect(res.headers.get("content-disposition")).toContain(snap.name);
    expect(res.headers.get("content-length")).toBe(String(snap.size)); // a browser shows the download's progress
    const file = join(second, "downloaded.db");
    writeFileSync(file, new Uint8Array(await res.arrayBuffer()));
    const db = new Database(file, { readonly: true });
    try {
      const users = db
        .query<{ name: string }, []>("SELECT name FROM users")
        .all()
        .map((u) => u.name);
      expect(users).toContain("admin");
    } finally {
      db.close();
      rmSync(file);
    }
    // Failover: with the higher-priority copy gone the download comes from `local`.
    rmSync(join(second, "_kura/backups", snap.name));
    const fallback = await admin.request("GET", `/api/admin/backups/${snap.name}`);
    expect(fallback.status).toBe(200);
    expect((await fallback.arrayBuffer()).byteLength).toBe(snap.size);

    // Taking and downloading are audited (the download hands out the whole database): one entry per download.
    const audited = async (action: string) =>
      (await admin.json("GET", `/api/admin/audit?action=${action}&target=${snap.name}`)).items.map((e: { actor_name: string; target: string }) => [
        e.actor_name,
        e.target,
      ]);
    expect(await audited("backup.create")).toEqual([["admin", snap.name]]);
    expect(await audited("backup.download")).toEqual([
      ["admin", snap.name],
      ["admin", snap.name],
    ]);

    await expectError(await admin.request("GET", "/api/admin/backups/kura-20000101-000000.000.db"), 404);
    await expectError(await admin.request("GET", "/api/admin/backups/..%2Fkura.db"), 404);
    await expectError(await admin.request("POST", "/api/admin/backups/not-a-snapshot/restore"), 404);
    await expectError(await admin.request("POST", "/api/admin/backups", undefined, { "x-csrf-token": "wrong" }), 403);
  });

  test("each channel keeps only backup_keep snapshots", async () => {
    await admin.json("PUT", "/api/admin/config", { backup_keep: 2 });
    const names: string[] = [];
    for (let i = 0; i < 3; i++) {
      names.push((await admin.json("POST", "/api/admin/backups", undefined, 201)).name);
      await Bun.sleep(5);
    }
    for (const root of [second, defaultRoot]) expect(snapshotsIn(root)).toEqual(names.slice(1));
    const list = await admin.json("GET", "/api/admin/backups");
    expect(list.items.map((i: { name: string }) => i.name)).toEqual(names.slice(1).reverse());
  });

  test("a channel that cannot be written opens backup_failed; the next full backup resolves it", async () => {
    renameSync(second, `${second}.away`);
    writeFileSync(second, "not a directory");
    try {
      // Partial failure (spec 4.11): the answer names the channels that were written.
      const partial = await admin.json("POST", "/api/admin/backups", undefined, 201);
      expect(partial.channels).toEqual(["local"]);
      const open = await admin.json("GET", "/api/admin/alerts");
      const alert = open.items.find((a: { kind: string }) => a.kind === "backup_failed");
      expect(alert).toMatchObject({ target: "", resolved_at: "" });
      expect(alert.message).toContain("second");
      await server.waitForLog(/msg=元数据备份失败 err=/);
    } finally {
      rmSync(second);
      renameSync(`${second}.away`, second);
    }
    await admin.json("POST", "/api/admin/backups", undefined, 201);
    const after = await admin.json("GET", "/api/admin/alerts");
    expect(after.items.filter((a: { kind: string }) => a.kind === "backup_failed")).toEqual([]);
  });
});

test("restore: the staged snapshot is swapped in at the next start and the old database is kept", async () => {
  let server = await KuraServer.start();
  const dataDir = server.dataDir;
  try {
    const admin = await adminSession(server);
    const user = await admin.json("POST", "/api/admin/users", { name: "restored-user", password: "password-1" }, 201);
    const snap = await admin.json("POST", "/api/admin/backups", undefined, 201);
    await admin.json("DELETE", `/api/admin/users/${user.id}`, undefined, 204);
    expect((await admin.json("GET", "/api/admin/users")).items.map((u: { name: string }) => u.name)).not.toContain("restored-user");

    const res = await admin.json("POST", `/api/admin/backups/${snap.name}/restore`);
    expect(res).toMatchObject({ snapshot: snap.name, staged: join(dataDir, "restore.staged.db") });
    expect(res.message).toMatch(/[\u4e00-\u9fff]/);
    expect(await server.proc.exited).toBe(0);
    expect(server.logs).toContain(`msg=收到恢复请求，正在关闭 snapshot=${snap.name} user=admin`);

    server = await KuraServer.start({ dataDir });
    expect(server.logs).toMatch(/msg=已换入快照，原数据库已保留 previous=\S+kura\.db\.before-restore-/);
    expect(server.logs).toMatch(/msg=已重置存储渠道绑定时间 channels=1/);
    // The snapshot's sessions (this admin's among them) are ended: a session logged out or ended by a
    // password change after the snapshot must not come back with it.
    expect(server.logs).toMatch(/msg=已结束快照中的全部会话，请重新登录 sessions=[1-9]/);
    await expectError(await fetch(server.url("/api/admin/me"), { headers: { cookie: admin.cookie } }), 401);
    expect(existsSync(join(dataDir, "restore.staged.db"))).toBe(false);
    const setAside = readdirSync(dataDir).find((f) => f.startsWith("kura.db.before-restore-"));
    expect(setAside).toBeDefined();
    // Who asked for the restore: in the log (above), and audited in the database the swap set aside.
    const old = new Database(join(dataDir, setAside!), { readonly: true });
    try {
      expect(old.query("SELECT actor_name, target FROM audit WHERE action = 'backup.restore'").all()).toEqual([{ actor_name: "admin", target: snap.name }]);
    } finally {
      old.close();
    }
    const again = new Session(server);
    expect((await again.login("admin", "admin-password-1")).status).toBe(200);
    expect((await again.json("GET", "/api/admin/users")).items.map((u: { name: string }) => u.name)).toContain("restored-user");
  } finally {
    await server.stop();
    rmSync(dataDir, { recursive: true, force: true });
  }
});

test("with no healthy channel the backup fails with an open backup_failed alert", async () => {
  const server = await KuraServer.start();
  try {
    const admin = await adminSession(server);
    const root = join(server.dataDir, "storage");
    rmSync(root, { recursive: true, force: true });
    writeFileSync(root, "not a directory");
    await admin.json("POST", "/api/admin/channels/1/check");
    await expectError(await admin.request("POST", "/api/admin/backups"), 503);
    const alert = (await admin.json("GET", "/api/admin/alerts")).items.find((a: { kind: string }) => a.kind === "backup_failed");
    expect(alert).toMatchObject({ target: "", resolved_at: "" });
    expect((await admin.json("GET", "/api/admin/backups")).items).toEqual([]);
  } finally {
    await server.dispose();
  }
});
