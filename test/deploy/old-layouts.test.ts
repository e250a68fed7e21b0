/**
 * What older installations leave behind and a start of this version must put right: a built-in
 * channel holding another data directory's absolute `…/storage` path; and the copies an upgrade
 * keeps (one per real upgrade, complete or absent, bounded in number); files left readable by
 * group and others before the umask 077 change.
 */
import { Database } from "bun:sqlite";
import { afterAll, describe, expect, test } from "bun:test";
import {
  chmodSync,
  chownSync,
  cpSync,
  existsSync,
  statSync,
  writeFileSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { MasterKey } from "../../src/config/master-key";
import { adminSession, Session } from "../helpers/client";
import { listFiles } from "../helpers/files";
import { form, makeJpeg, sha256 } from "../helpers/images";
import { KuraServer, runCli } from "../helpers/server";
import { MIGRATIONS } from "../../src/db/migrations";
import { migrate, openDatabase, schemaVersion } from "../../src/db/open";

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

describe("copies before a migration", () => {
  const latest = MIGRATIONS.at(-1)!;
  const COPY = /^kura\.db\.before-migration-v(\d+)-\d{8}-\d{6}\.\d{3}$/;
  const copies = (dir: string) =>
    readdirSync(dir)
      .filter((f) => COPY.test(f))
      .sort();
  const versionOf = (file: string) => {
    const db = new Database(file, { readonly: true });
    try {
      return schemaVersion(db);
    } finally {
      db.close();
    }
  };

  test("an upgrade that keeps failing makes one complete copy of the real old version, not one per start; old copies are pruned to 3", async () => {
    const dir = tempDir("kura-failing-upgrade-");
    const { key, text } = MasterKey.generate();
    writeFileSync(join(dir, "master.key"), `${text}\n`, { mode: 0o600 });
    const from = MIGRATIONS.at(-3)!.version;
    const db = openDatabase(join(dir, "kura.db"));
    migrate(db, MIGRATIONS.slice(0, -2));
    db.query("INSERT INTO meta (key, value) VALUES ('master_key_fingerprint', ?)").run(key.fingerprint);
    // The last migration fails every time, whatever it contains (as a dev-branch database did).
    db.exec(`CREATE TRIGGER fail_last BEFORE INSERT ON schema_migrations WHEN NEW.version = ${latest.version} BEGIN SELECT RAISE(ABORT, 'boom'); END`);
    db.exec("PRAGMA wal_checkpoint(TRUNCATE)");
    db.close();
    // Copies of earlier upgrades, and what a kill inside VACUUM INTO leaves.
    for (const name of ["v1-20200101-000000.000", "v2-20210101-000000.000", "v3-20220101-000000.000"])
      writeFileSync(join(dir, `kura.db.before-migration-${name}`), "old");
    writeFileSync(join(dir, "kura.db.before-migration-v3-20230101-000000.000.partial"), "half");
    writeFileSync(join(dir, "kura.db.before-migration-v3-20230101-000000.000.partial-journal"), "half");

    for (let start = 0; start < 3; start++) {
      const r = await runCli(["serve"], { KURA_DATA_DIR: dir, KURA_LISTEN: "127.0.0.1:0" });
      expect(r.code, r.err).toBe(1);
      expect(r.err).toContain(
        `数据库结构迁移 ${latest.name}（第 ${latest.version} 步）失败，这一步已整体回滚，数据库结构版本停在 ${MIGRATIONS.at(-2)!.version}（详情：boom）`,
      );
      if (start === 0) {
        expect(r.err).toContain(`迁移数据库结构前已保存快照 from=${from} to=${latest.version}`);
        expect(r.err).toContain("已删除较早的迁移前数据库副本 removed=kura.db.before-migration-v1-20200101-000000.000 kept=3");
      } else {
        // The database is now one step further, but the copy to go back to is still the one of the real old version.
        expect(r.err).toContain(`上次升级未完成，保留那次升级前的数据库副本，不再另存 from=${from} current=${MIGRATIONS.at(-2)!.version}`);
      }
    }
    const made = copies(dir).filter((f) => !f.includes("-2020") && !f.includes("-2021") && !f.includes("-2022"));
    expect(made).toHaveLength(1);
    expect(COPY.exec(made[0]!)![1]).toBe(String(from));
    expect(versionOf(join(dir, made[0]!))).toBe(from);
    expect(copies(dir)).toHaveLength(3);
    expect(readdirSync(dir).filter((f) => f.includes(".partial"))).toEqual([]);

    // Fixed: the upgrade finishes, and the next one would get its own copy.
    const fix = new Database(join(dir, "kura.db"));
    fix.exec("DROP TRIGGER fail_last");
    fix.close();
    const server = await KuraServer.start({ dataDir: dir });
    await server.stop();
    expect(versionOf(join(dir, "kura.db"))).toBe(latest.version);
    const after = new Database(join(dir, "kura.db"), { readonly: true });
    expect(after.query("SELECT value FROM meta WHERE key = 'upgrade_in_progress'").get()).toBeNull();
    after.close();
    expect(copies(dir)).toHaveLength(3);
  }, 120_000);
});

describe("permissions left by versions before umask 077", () => {
  test("a start takes the data directory, its files, subdirectories and snapshots to 0700/0600, logs it once, and skips files of another owner", async () => {
    const dir = join(tempDir("kura-perms-"), "data");
    mkdirSync(dir);
    const first = await KuraServer.start({ dataDir: dir });
    const snap = await (await admin(first)).json("POST", "/api/admin/backups", undefined, 201);
    await first.stop();
    const backup = join("storage", "_kura", "backups", snap.name);
    // What an installation created under umask 022 looks like.
    const loose: Record<string, number> = {
      ".": 0o755,
      "kura.db": 0o644,
      "master.key": 0o644,
      storage: 0o755,
      variants: 0o755,
      "storage/_kura": 0o755,
      "storage/_kura/backups": 0o755,
      [backup]: 0o644,
    };
    for (const [rel, mode] of Object.entries(loose)) chmodSync(join(dir, rel), mode);
    // A file that belongs to someone else (say, left by a command run as another user).
    const foreign = "kura.db.before-migration-v1-20200101-000000.000";
    writeFileSync(join(dir, foreign), "x", { mode: 0o644 });
    chmodSync(join(dir, foreign), 0o644);
    const owned = process.getuid?.() === 0;
    if (owned) chownSync(join(dir, foreign), 65534, 65534);
    const modeOf = (rel: string) => statSync(join(dir, rel)).mode & 0o777;

    const server = await KuraServer.start({ dataDir: dir });
    await server.stop();
    for (const [rel, mode] of Object.entries(loose)) expect([rel, modeOf(rel)]).toEqual([rel, statSync(join(dir, rel)).isDirectory() ? 0o700 : mode & 0o700]);
    expect(server.logs.match(/已收紧旧版本创建的数据目录权限/g)).toHaveLength(1);
    expect(server.logs).toMatch(/已收紧旧版本创建的数据目录权限（组和其他用户不再可读） count=\d+ changed=/);
    // The WAL files SQLite made with the database's old mode are caught too.
    for (const entry of ["kura.db(644→600)", "kura.db-wal(644→600)", `${backup}(644→600)`, ".(755→700)"]) expect(server.logs).toContain(entry);
    if (owned) {
      expect(modeOf(foreign)).toBe(0o644);
      expect(server.logs).toMatch(new RegExp(`数据目录中有文件不属于运行 Kura 的用户，未改其权限" paths=${foreign.replaceAll(".", "\\.")}`));
    }
    // Nothing left to do: no line at the next start.
    const again = await KuraServer.start({ dataDir: dir });
    await again.stop();
    expect(again.logs).not.toContain("已收紧旧版本创建的数据目录权限");
  }, 60_000);
});
