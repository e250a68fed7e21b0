/**
 * Data-directory safety for operators: one instance per directory, private files, a
 * default channel that survives moving the directory, maintenance commands that never
 * create a directory, and the one-time hint for a missing KURA_TRUSTED_PROXIES.
 */
import { Database } from "bun:sqlite";
import { afterAll, describe, expect, test } from "bun:test";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, renameSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { MasterKey } from "../../src/config/master-key";
import { adminSession, expectError, Session } from "../helpers/client";
import { listFiles } from "../helpers/files";
import { form, makeJpeg, sha256 } from "../helpers/images";
import { KuraServer, runCli } from "../helpers/server";

const temps: string[] = [];
function tempDir(prefix: string): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  temps.push(dir);
  return dir;
}
afterAll(() => {
  for (const dir of temps) rmSync(dir, { recursive: true, force: true });
});

const privateMode = (path: string) => statSync(path).mode & 0o077;

const PASSWORD = "admin-password-1";

/** The admin, whether this data directory still has the factory password or already the test's own. */
async function admin(server: KuraServer): Promise<Session> {
  const s = new Session(server);
  if ((await s.login("admin", PASSWORD)).status === 200) return s;
  return adminSession(server, PASSWORD);
}

/** The default channel's stored `path`, as the edit view shows it. */
async function defaultChannelPath(server: KuraServer): Promise<string> {
  const session = await admin(server);
  const list = await session.json("GET", "/api/admin/channels");
  const id = list.items.find((c: { name: string }) => c.name === "local").id;
  return (await session.json("GET", `/api/admin/channels/${id}/config`)).config.path;
}

async function uploadOne(server: KuraServer, seed: number): Promise<{ id: string; bytes: Uint8Array }> {
  const session = await admin(server);
  const bytes = await makeJpeg(120, 90, seed);
  const res = await session.request("POST", "/api/admin/upload", form(bytes));
  const text = await res.text();
  if (res.status !== 200 && res.status !== 201) throw new Error(`upload failed ${res.status}: ${text}`);
  return { id: JSON.parse(text).id, bytes };
}

describe("one instance per data directory", () => {
  test("a second serve on the same directory refuses with a clear error; the lock dies with the process", async () => {
    const first = await KuraServer.start();
    try {
      const second = await runCli(["serve"], { KURA_DATA_DIR: first.dataDir, KURA_LISTEN: "127.0.0.1:0" });
      expect(second.code).not.toBe(0);
      expect(second.err).toContain("已被另一个 Kura 进程占用");
      expect(second.err).toContain(first.dataDir);
      // Maintenance commands that rebuild the context refuse too (they would undo in-flight uploads).
      const backup = await runCli(["backup"], { KURA_DATA_DIR: first.dataDir });
      expect(backup.code).not.toBe(0);
      expect(backup.err).toContain("需要先停止服务");
      // The first instance is untouched.
      expect((await fetch(first.url("/healthz"))).status).toBe(200);
      // SIGKILL: no clean shutdown, yet the kernel released the lock with the process.
      await first.stop("SIGKILL");
      const again = await KuraServer.start({ dataDir: first.dataDir });
      await again.stop();
    } finally {
      await first.dispose();
    }
  });
});

describe("files in the data directory are private", () => {
  test("database, WAL, master key, stored images and the directories are not readable by group or others", async () => {
    const server = await KuraServer.start();
    try {
      const { bytes } = await uploadOne(server, 3);
      const dir = server.dataDir;
      const stored = listFiles(join(dir, "storage")).filter((f) => f.startsWith("img/"));
      expect(stored.length).toBe(1);
      expect(sha256(await Bun.file(join(dir, "storage", stored[0]!)).bytes())).toBe(sha256(bytes));
      for (const path of ["kura.db", "kura.db-wal", "master.key", "storage", join("storage", stored[0]!)]) {
        expect([path, privateMode(join(dir, path))]).toEqual([path, 0]);
      }
    } finally {
      await server.dispose();
    }
  });
});

describe("the default local channel is relative to the data directory", () => {
  test("moving the whole directory keeps images readable and new uploads land in the new place", async () => {
    const parent = tempDir("kura-move-");
    const oldDir = join(parent, "data");
    mkdirSync(oldDir); // the helper runs Kura inside its data directory
    const first = await KuraServer.start({ dataDir: oldDir });
    const { id, bytes } = await uploadOne(first, 5);
    expect(await defaultChannelPath(first)).toBe("storage");
    await first.stop();

    const newDir = join(parent, "moved", "kura");
    await Bun.$`mkdir -p ${join(parent, "moved")} && mv ${oldDir} ${newDir}`;
    const moved = await KuraServer.start({ dataDir: newDir });
    try {
      const res = await fetch(moved.url(`/i/${id}`));
      expect(res.status).toBe(200);
      expect(sha256(new Uint8Array(await res.arrayBuffer()))).toBe(sha256(bytes));
      await uploadOne(moved, 6);
      expect(listFiles(join(newDir, "storage")).filter((f) => f.startsWith("img/")).length).toBe(2);
      expect(existsSync(oldDir)).toBe(false);
      // The exported rclone config names the absolute place (rclone has no data directory).
      const session = await admin(moved);
      const local = (await session.json("GET", "/api/admin/channels")).items.find((c: { name: string }) => c.name === "local");
      const exported = await (await session.request("GET", `/api/admin/channels/${local.id}/rclone-config`)).text();
      expect(exported).toContain(`kura-${local.id}:${join(newDir, "storage")}`);
    } finally {
      await moved.stop();
    }
  });

  test("an absolute default path written by an older version is rewritten to the relative form", async () => {
    const parent = tempDir("kura-legacy-");
    const dir = join(parent, "data");
    mkdirSync(dir);
    const first = await KuraServer.start({ dataDir: dir });
    const { id, bytes } = await uploadOne(first, 7);
    await first.stop();
    // What older versions stored: the sealed config holds <data_dir>/storage as an absolute path.
    const key = MasterKey.parse(await Bun.file(join(dir, "master.key")).text());
    const db = new Database(join(dir, "kura.db"));
    const row = db.query<{ id: number; config_sealed: string }, []>("SELECT id, config_sealed FROM channels WHERE name = 'local'").get()!;
    const secrets = JSON.parse(key.decrypt(row.config_sealed));
    secrets.config.path = join(dir, "storage");
    db.query("UPDATE channels SET config_sealed = ? WHERE id = ?").run(key.encrypt(JSON.stringify(secrets)), row.id);
    db.close();

    const upgraded = await KuraServer.start({ dataDir: dir });
    await upgraded.waitForLog(/本地存储渠道路径已改为相对数据目录 channel=local path=storage/);
    expect(await defaultChannelPath(upgraded)).toBe("storage");
    await upgraded.stop();

    const newDir = join(parent, "elsewhere");
    renameSync(dir, newDir);
    const moved = await KuraServer.start({ dataDir: newDir });
    try {
      const res = await fetch(moved.url(`/i/${id}`));
      expect(sha256(new Uint8Array(await res.arrayBuffer()))).toBe(sha256(bytes));
    } finally {
      await moved.stop();
    }
  });
});

describe("maintenance commands in a wrong directory", () => {
  test("reset-password refuses to create a data directory, names KURA_DATA_DIR and exits non-zero", async () => {
    const parent = tempDir("kura-wrongdir-");
    const missing = join(parent, "data");
    const r = await runCli(["reset-password"], { KURA_DATA_DIR: missing });
    expect(r.code).not.toBe(0);
    expect(r.err).toContain("KURA_DATA_DIR");
    expect(r.err).toContain("没有 Kura 数据库");
    expect(r.out + r.err).not.toContain("password=");
    expect(existsSync(missing)).toBe(false);
    // An existing but empty directory (say, the current one) gets no database and no key either.
    const empty = tempDir("kura-emptydir-");
    const again = await runCli(["reset-password"], { KURA_DATA_DIR: empty });
    expect(again.code).not.toBe(0);
    expect(readdirSync(empty)).toEqual([]);
    for (const command of ["backup", "check"]) {
      const other = await runCli([command], { KURA_DATA_DIR: empty });
      expect([command, other.code !== 0, other.err.includes("KURA_DATA_DIR")]).toEqual([command, true, true]);
    }
    expect(readdirSync(empty)).toEqual([]);
  });
});

describe("hint for a missing KURA_TRUSTED_PROXIES", () => {
  test("X-Forwarded-For from an untrusted private peer logs one warning naming the variable, once", async () => {
    const server = await KuraServer.start();
    try {
      await fetch(server.url("/healthz"));
      expect(server.logs).not.toContain("KURA_TRUSTED_PROXIES");
      for (let i = 0; i < 3; i++) await fetch(server.url("/healthz"), { headers: { "x-forwarded-for": `203.0.113.${i + 1}` } });
      await server.waitForLog(/level=WARN msg=.*KURA_TRUSTED_PROXIES/);
      await fetch(server.url("/api/admin/me"), { headers: { "x-forwarded-for": "203.0.113.9" } });
      expect(server.logs.split("\n").filter((l) => l.includes("KURA_TRUSTED_PROXIES")).length).toBe(1);
      await expectError(await fetch(server.url("/api/admin/me")), 401);
    } finally {
      await server.dispose();
    }
  });

  test("no hint when the peer is a trusted proxy", async () => {
    const server = await KuraServer.start({ env: { KURA_TRUSTED_PROXIES: "127.0.0.1" } });
    try {
      await fetch(server.url("/healthz"), { headers: { "x-forwarded-for": "203.0.113.1" } });
      await fetch(server.url("/healthz"));
      expect(server.logs).not.toContain("KURA_TRUSTED_PROXIES");
    } finally {
      await server.dispose();
    }
  });
});
