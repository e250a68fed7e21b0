/**
 * Upgrades and disaster recovery from the operator's side: the automatic snapshot before a
 * migration, `kura backup` and `kura check` on a stopped service, and `kura restore FILE`
 * on a fresh machine that has nothing but the snapshot and master.key.
 */
import { Database } from "bun:sqlite";
import { afterAll, describe, expect, test } from "bun:test";
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { MasterKey } from "../../src/config/master-key";
import { MIGRATIONS } from "../../src/db/migrations";
import { migrate, openDatabase, schemaVersion } from "../../src/db/open";
import { adminSession, Session } from "../helpers/client";
import { form, makeJpeg, sha256 } from "../helpers/images";
import { KuraServer, runCli } from "../helpers/server";

const PASSWORD = "recovery-pass-1";
const temps: string[] = [];
function tempDir(prefix: string): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  temps.push(dir);
  return dir;
}
afterAll(() => {
  for (const dir of temps) rmSync(dir, { recursive: true, force: true });
});

const versionOf = (file: string) => {
  const db = new Database(file, { readonly: true });
  try {
    return schemaVersion(db);
  } finally {
    db.close();
  }
};
const preMigrationFiles = (dir: string) => readdirSync(dir).filter((f) => /^kura\.db\.before-migration-v\d+-\d{8}-\d{6}\.\d{3}$/.test(f));

describe("upgrade: a snapshot before migrating an existing database", () => {
  test("an older schema is copied (0600) before the migration runs; a current or new database gets none", async () => {
    const dir = tempDir("kura-upgrade-");
    // A data directory as an older Kura left it: schema one migration behind, its key next to it.
    const { key, text } = MasterKey.generate();
    writeFileSync(join(dir, "master.key"), `${text}\n`, { mode: 0o600 });
    const old = openDatabase(join(dir, "kura.db"));
    migrate(old, MIGRATIONS.slice(0, -1));
    old.query("INSERT INTO meta (key, value) VALUES ('master_key_fingerprint', ?)").run(key.fingerprint);
    old.exec("PRAGMA wal_checkpoint(TRUNCATE)");
    old.close();
    const before = MIGRATIONS.at(-2)!.version;

    const server = await KuraServer.start({ dataDir: dir });
    await server.waitForLog(new RegExp(`迁移数据库结构前已保存快照 from=${before} to=${MIGRATIONS.at(-1)!.version}`));
    // The log says what the quiet start is doing: the upgrade announced before the copy, each step with its time.
    const last = MIGRATIONS.at(-1)!;
    await server.waitForLog(new RegExp(`msg=数据库结构迁移完成 step=${last.version} name=${last.name} ms=\\d+`));
    const announced = server.logs.search(new RegExp(`msg=数据库需要升级\\S* from=${before} to=${last.version} db_mib=\\d+`));
    expect(announced).toBeGreaterThanOrEqual(0);
    expect(announced).toBeLessThan(server.logs.indexOf("迁移数据库结构前已保存快照"));
    await server.stop();
    const snaps = preMigrationFiles(dir);
    expect(snaps.length).toBe(1);
    expect(snaps[0]).toStartWith(`kura.db.before-migration-v${before}-`);
    expect(versionOf(join(dir, snaps[0]!))).toBe(before);
    expect(statSync(join(dir, snaps[0]!)).mode & 0o077).toBe(0);
    expect(versionOf(join(dir, "kura.db"))).toBe(MIGRATIONS.at(-1)!.version);

    // Nothing to migrate: no further copy.
    const again = await KuraServer.start({ dataDir: dir });
    await again.stop();
    expect(preMigrationFiles(dir).length).toBe(1);

    const fresh = await KuraServer.start();
    try {
      expect(preMigrationFiles(fresh.dataDir)).toEqual([]);
    } finally {
      await fresh.dispose();
    }
  });
});

describe("disaster recovery onto a new machine", () => {
  test("kura backup and kura check on the stopped service, then kura restore FILE with only master.key", async () => {
    const oldMachine = tempDir("kura-old-");
    const offsite = tempDir("kura-offsite-"); // stands in for a remote channel (S3, WebDAV…)
    const server = await KuraServer.start({ dataDir: oldMachine });
    const admin = await adminSession(server, PASSWORD);
    await admin.json("POST", "/api/admin/channels", { name: "offsite", driver: "local", config: { path: offsite }, priority: 10 }, 201);
    const jpeg = await makeJpeg(200, 150, 41);
    const uploaded = await admin.request("POST", "/api/admin/upload", form(jpeg));
    expect(uploaded.status).toBe(200);
    const { id } = (await uploaded.json()) as { id: string };
    await server.stop();

    // kura check: database and every channel, summary on stdout.
    const check = await runCli(["check"], { KURA_DATA_DIR: oldMachine });
    expect(check.code, check.out + check.err).toBe(0);
    expect(check.out).toContain("[正常] 数据库完整性：正常");
    expect(check.out).toMatch(/\[正常\] 存储渠道 offsite（local）：正常，已完成副本 1/);
    expect(check.out).toMatch(/\[正常\] 存储渠道 local（local）：正常/);
    expect(check.out).toContain("检查完成：全部正常");

    // kura backup: one snapshot now, on every channel.
    const backup = await runCli(["backup"], { KURA_DATA_DIR: oldMachine });
    expect(backup.code, backup.out + backup.err).toBe(0);
    const name = /已写入快照 (kura-\d{8}-\d{6}\.\d{3}\.db)/.exec(backup.out)![1]!;
    const remoteCopy = join(offsite, "_kura/backups", name);
    expect(existsSync(remoteCopy)).toBe(true);
    expect(existsSync(join(oldMachine, "storage/_kura/backups", name))).toBe(true);

    // The old machine is gone. What survives: the offsite channel and the master key.
    const downloaded = join(tempDir("kura-download-"), name);
    copyFileSync(remoteCopy, downloaded);
    const keyCopy = join(tempDir("kura-keycopy-"), "master.key");
    copyFileSync(join(oldMachine, "master.key"), keyCopy);
    rmSync(oldMachine, { recursive: true, force: true });

    // Without the key nothing is staged.
    const noKey = join(tempDir("kura-nokey-"), "data");
    const refused = await runCli(["restore", downloaded], { KURA_DATA_DIR: noKey });
    expect(refused.code).not.toBe(0);
    expect(refused.err).toContain("master.key");
    expect(existsSync(join(noKey, "restore.staged.db"))).toBe(false);
    // Nor with another key.
    const wrong = await runCli(["restore", downloaded], { KURA_DATA_DIR: noKey, KURA_MASTER_KEY: MasterKey.generate().text });
    expect(wrong.code).not.toBe(0);
    expect(wrong.err).toContain("不匹配");
    expect(existsSync(join(noKey, "restore.staged.db"))).toBe(false);

    const newMachine = join(tempDir("kura-new-"), "kura");
    mkdirSync(newMachine, { mode: 0o700 });
    copyFileSync(keyCopy, join(newMachine, "master.key"));
    const restored = await runCli(["restore", downloaded], { KURA_DATA_DIR: newMachine });
    expect(restored.code, restored.err).toBe(0);
    expect(restored.out).toContain("已暂存快照");
    expect(statSync(join(newMachine, "restore.staged.db")).mode & 0o077).toBe(0);

    const recovered = await KuraServer.start({ dataDir: newMachine });
    try {
      await recovered.waitForLog(/已换入快照/);
      const session = new Session(recovered);
      expect((await session.login("admin", PASSWORD)).status).toBe(200);
      const list = await session.json("GET", "/api/admin/images");
      expect(list.items.map((i: { id: string }) => i.id)).toContain(id);
      const res = await fetch(recovered.url(`/i/${id}`));
      expect(res.status).toBe(200);
      expect(sha256(new Uint8Array(await res.arrayBuffer()))).toBe(sha256(jpeg));
    } finally {
      await recovered.stop();
    }
  });

  test("kura check reports a broken channel and exits non-zero", async () => {
    const dir = tempDir("kura-check-");
    const broken = join(tempDir("kura-broken-"), "gone");
    mkdirSync(broken);
    const server = await KuraServer.start({ dataDir: dir });
    const admin = await adminSession(server, PASSWORD);
    await admin.json("POST", "/api/admin/channels", { name: "nas", driver: "local", config: { path: broken } }, 201);
    await server.stop();
    rmSync(broken, { recursive: true });
    writeFileSync(broken, "not a directory");
    const check = await runCli(["check"], { KURA_DATA_DIR: dir });
    expect(check.code).toBe(1);
    expect(check.out).toMatch(/\[异常\] 存储渠道 nas（local）：异常：/);
    expect(check.out).toContain("检查完成：1 项异常");
  });
});
