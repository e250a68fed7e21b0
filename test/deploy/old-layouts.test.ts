/**
 * What older installations leave behind and a start of this version must put right: a built-in
 * channel holding another data directory's absolute `…/storage` path.
 */
import { Database } from "bun:sqlite";
import { afterAll, describe, expect, test } from "bun:test";
import { cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, renameSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { MasterKey } from "../../src/config/master-key";
import { adminSession, Session } from "../helpers/client";
import { listFiles } from "../helpers/files";
import { form, makeJpeg, sha256 } from "../helpers/images";
import { KuraServer } from "../helpers/server";

const temps: string[] = [];
function tempDir(prefix: string): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  temps.push(dir);
  return dir;
}
afterAll(() => {
  for (const dir of temps) rmSync(dir, { recursive: true, force: true });
});

const PASSWORD = "admin-password-1";
async function admin(server: KuraServer): Promise<Session> {
  const s = new Session(server);
  if ((await s.login("admin", PASSWORD)).status === 200) return s;
  return adminSession(server, PASSWORD);
}

/** Every channel's stored `path` by name, as the edit view shows it. */
async function channelPaths(server: KuraServer): Promise<Record<string, string>> {
  const session = await admin(server);
  const out: Record<string, string> = {};
  for (const c of (await session.json("GET", "/api/admin/channels")).items as { id: number; name: string }[]) {
    out[c.name] = (await session.json("GET", `/api/admin/channels/${c.id}/config`)).config.path;
  }
  return out;
}

async function upload(server: KuraServer, seed: number): Promise<{ id: string; bytes: Uint8Array }> {
  const bytes = await makeJpeg(120, 90, seed);
  const res = await (await admin(server)).request("POST", "/api/admin/upload", form(bytes));
  expect(res.status).toBe(200);
  return { id: ((await res.json()) as { id: string }).id, bytes };
}

/** Writes `path` into a channel's sealed config, as an older version stored it. */
function setChannelPath(dir: string, name: string, path: string) {
  const key = MasterKey.parse(readFileSync(join(dir, "master.key"), "utf8"));
  const db = new Database(join(dir, "kura.db"));
  const row = db.query<{ id: number; config_sealed: string }, [string]>("SELECT id, config_sealed FROM channels WHERE name = ?").get(name)!;
  const secrets = JSON.parse(key.decrypt(row.config_sealed));
  secrets.config.path = path;
  db.query("UPDATE channels SET config_sealed = ? WHERE id = ?").run(key.encrypt(JSON.stringify(secrets)), row.id);
  db.close();
}

describe("the built-in channel follows the data directory", () => {
  test("an older version's absolute <old data dir>/storage, moved or copied elsewhere, becomes this directory's storage; an admin's path stays", async () => {
    const parent = tempDir("kura-oldpath-");
    const oldDir = join(parent, "old");
    mkdirSync(oldDir);
    const chosen = join(parent, "chosen", "storage"); // a path an admin picked, also named storage
    mkdirSync(chosen, { recursive: true });
    const first = await KuraServer.start({ dataDir: oldDir });
    const session = await admin(first);
    await session.json("POST", "/api/admin/channels", { name: "mine", driver: "local", config: { path: chosen }, priority: 1 }, 201);
    const before = await upload(first, 3);
    await first.stop();
    // What versions before the relative default stored: the absolute path of their own data dir.
    setChannelPath(oldDir, "local", join(oldDir, "storage"));

    // A copy at another path (the old directory still there), and the original moved away.
    const copy = join(parent, "copy");
    cpSync(oldDir, copy, { recursive: true });
    const moved = join(parent, "moved");
    renameSync(oldDir, moved);
    for (const dir of [copy, moved]) {
      const server = await KuraServer.start({ dataDir: dir });
      try {
        await server.waitForLog(
          /内置本地存储渠道指向另一个数据目录的 storage（旧版本保存的绝对路径），已改为当前数据目录的 storage" channel=local from=\S+\/old\/storage path=storage/,
        );
        expect(await channelPaths(server)).toEqual({ local: "storage", mine: chosen });
        const res = await fetch(server.url(`/i/${before.id}`));
        expect(sha256(new Uint8Array(await res.arrayBuffer()))).toBe(sha256(before.bytes));
        const files = listFiles(join(dir, "storage")).length;
        await upload(server, dir === copy ? 4 : 5);
        // Replicas are copied in the background: the new one lands in this directory's storage.
        for (let i = 0; i < 200 && listFiles(join(dir, "storage")).length <= files; i++) await Bun.sleep(50);
        expect(listFiles(join(dir, "storage")).length).toBeGreaterThan(files);
      } finally {
        await server.stop();
      }
      // Nothing was written at the old machine's path.
      expect(existsSync(join(parent, "old"))).toBe(false);
    }
    expect(readdirSync(parent).sort()).toEqual(["chosen", "copy", "moved"]);
  }, 120_000);

  test("an admin's absolute path on the built-in channel is kept when it is not an old data directory's storage", async () => {
    const parent = tempDir("kura-adminpath-");
    const dir = join(parent, "data");
    mkdirSync(dir);
    const chosen = join(parent, "disk", "storage");
    mkdirSync(chosen, { recursive: true });
    const first = await KuraServer.start({ dataDir: dir });
    await admin(first);
    await first.stop();
    setChannelPath(dir, "local", chosen);
    const server = await KuraServer.start({ dataDir: dir });
    try {
      expect(await channelPaths(server)).toEqual({ local: chosen });
      expect(server.logs).not.toContain("内置本地存储渠道指向另一个数据目录");
    } finally {
      await server.stop();
    }
  }, 60_000);
});
