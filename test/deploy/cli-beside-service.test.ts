/**
 * One-shot commands and the data directory they share with the service: only the process that
 * holds kura.lock swaps a staged restore in, and no command but a start migrates an older schema.
 */
import { describe, expect, test } from "bun:test";
import { existsSync, readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { MasterKey } from "../../src/config/master-key";
import { MIGRATIONS } from "../../src/db/migrations";
import { migrate, openDatabase } from "../../src/db/open";
import { adminSession, Session } from "../helpers/client";
import { form, makeJpeg, sha256 } from "../helpers/images";
import { KuraServer, runCli } from "../helpers/server";
import { useTempDirs } from "../helpers/temp-dirs";

const tempDir = useTempDirs();

/** name → sha256 of every file directly in `dir` (kura.lock, the instance lock, left out). */
function filesOf(dir: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const f of readdirSync(dir).sort()) {
    if (f === "kura.lock" || !statSync(join(dir, f)).isFile()) continue;
    out[f] = sha256(readFileSync(join(dir, f)));
  }
  return out;
}

describe("a staged restore and a command run beside the running service", () => {
  test("reset-password reaches the live database of a running service", async () => {
    const server = await KuraServer.start({ dataDir: tempDir("kura-beside-") });
    try {
      const admin = await adminSession(server);
      const reset = await runCli(["reset-password"], { KURA_DATA_DIR: server.dataDir });
      expect(reset.code, reset.err).toBe(0);
      // The new password and the ended sessions are those of the running service.
      const password = /user=admin password=(\S+)/.exec(reset.err)![1]!;
      expect((await admin.request("GET", "/api/admin/images")).status).toBe(401);
      expect((await new Session(server).login("admin", password)).status).toBe(200);
    } finally {
      await server.stop();
    }
  }, 60_000);

  test("reset-password refuses while a restore waits for the service's next start (the swap would drop its password); both files stay as they are", async () => {
    const dir = tempDir("kura-beside-");
    const server = await KuraServer.start({ dataDir: dir });
    try {
      const admin = await adminSession(server);
      const snap = await admin.json("POST", "/api/admin/backups", undefined, 201);
      const file = join(tempDir("kura-snapfile-"), snap.name);
      await Bun.write(file, await (await admin.request("GET", `/api/admin/backups/${snap.name}`)).arrayBuffer());
      // Uploaded after the snapshot: only the live database has it.
      const uploaded = await admin.request("POST", "/api/admin/upload", form(await makeJpeg(80, 60, 7)));
      expect(uploaded.status).toBe(200);
      const { id } = (await uploaded.json()) as { id: string };

      const staged = await runCli(["restore", file], { KURA_DATA_DIR: dir });
      expect(staged.code, staged.err).toBe(0);
      const dbIno = statSync(join(dir, "kura.db")).ino;
      const stagedHash = sha256(readFileSync(join(dir, "restore.staged.db")));

      const reset = await runCli(["reset-password"], { KURA_DATA_DIR: dir });
      expect(reset.code, reset.err).toBe(1);
      expect(reset.err).toContain(`level=ERROR msg="已暂存待换入的快照：服务下次启动时它会替换当前数据库，现在重设的密码会随之失效。请先重启服务`);
      expect(reset.err).not.toContain("password=");
      // The service's open database was neither renamed nor replaced; the staged file still waits, unchanged.
      expect(statSync(join(dir, "kura.db")).ino).toBe(dbIno);
      expect(sha256(readFileSync(join(dir, "restore.staged.db")))).toBe(stagedHash);
      expect(readdirSync(dir).filter((f) => f.includes("before-restore"))).toEqual([]);
      // The admin's password and session are untouched, and it still serves its own data.
      expect((await admin.request("GET", "/api/admin/images")).status).toBe(200);
      expect((await fetch(server.url(`/i/${id}`))).status).toBe(200);
    } finally {
      await server.stop();
    }
    // The next start is the one that swaps it in; then reset-password works on the restored database.
    const restarted = await KuraServer.start({ dataDir: dir });
    try {
      await restarted.waitForLog(/已换入快照/);
      expect(existsSync(join(dir, "restore.staged.db"))).toBe(false);
      const reset = await runCli(["reset-password"], { KURA_DATA_DIR: dir });
      expect(reset.code, reset.err).toBe(0);
      const password = /user=admin password=(\S+)/.exec(reset.err)![1]!;
      expect((await new Session(restarted).login("admin", password)).status).toBe(200);
    } finally {
      await restarted.stop();
    }
  }, 120_000);

  test("with no service running, reset-password owns the directory and swaps the staged snapshot in", async () => {
    const dir = tempDir("kura-owner-");
    const server = await KuraServer.start({ dataDir: dir });
    const admin = await adminSession(server);
    const snap = await admin.json("POST", "/api/admin/backups", undefined, 201);
    const file = join(tempDir("kura-snapfile-"), snap.name);
    await Bun.write(file, await (await admin.request("GET", `/api/admin/backups/${snap.name}`)).arrayBuffer());
    await server.stop();
    expect((await runCli(["restore", file], { KURA_DATA_DIR: dir })).code).toBe(0);
    const reset = await runCli(["reset-password"], { KURA_DATA_DIR: dir });
    expect(reset.code, reset.err).toBe(0);
    expect(reset.err).toContain("已换入快照");
    expect(existsSync(join(dir, "restore.staged.db"))).toBe(false);
  }, 60_000);
});

describe("an older schema: no command but the start migrates", () => {
  /** A data directory as an older Kura left it: schema one migration behind, its key beside it. */
  function olderDataDir(): string {
    const dir = tempDir("kura-older-");
    const { key, text } = MasterKey.generate();
    writeFileSync(join(dir, "master.key"), `${text}\n`, { mode: 0o600 });
    const old = openDatabase(join(dir, "kura.db"));
    migrate(old, MIGRATIONS.slice(0, -1));
    old.query("INSERT INTO meta (key, value) VALUES ('master_key_fingerprint', ?)").run(key.fingerprint);
    old.exec("PRAGMA wal_checkpoint(TRUNCATE)");
    old.close();
    return dir;
  }
  const before = MIGRATIONS.at(-2)!.version;
  const latest = MIGRATIONS.at(-1)!.version;

  test("kura check reports the schema found and the one a start migrates to, and changes no file", async () => {
    const dir = olderDataDir();
    const files = filesOf(dir);
    const check = await runCli(["check"], { KURA_DATA_DIR: dir });
    expect(check.code, check.out + check.err).toBe(0);
    expect(check.out).toContain("[正常] 数据库完整性：正常");
    expect(check.out).toContain(`结构版本：${before}，本程序会迁移到 ${latest}：下次用本程序启动服务时自动迁移`);
    expect(check.out).toContain("未改动任何文件");
    expect(check.out + check.err).not.toContain("迁移数据库结构前已保存快照");
    expect(filesOf(dir)).toEqual(files);

    // The start is what migrates, with its copy.
    const server = await KuraServer.start({ dataDir: dir });
    await server.waitForLog(new RegExp(`迁移数据库结构前已保存快照 from=${before} to=${latest}`));
    await server.stop();
  }, 60_000);

  test("kura backup and reset-password refuse an older schema, say to start the new version first, change nothing", async () => {
    const dir = olderDataDir();
    const files = filesOf(dir);
    for (const command of ["backup", "reset-password"]) {
      const r = await runCli([command], { KURA_DATA_DIR: dir });
      expect([command, r.code]).toEqual([command, 1]);
      expect(r.err).toContain(`数据库结构版本 ${before} 低于本程序的 ${latest}：此命令不迁移数据库。请先用新版本启动服务`);
      expect(r.err).not.toContain("password=");
      expect(filesOf(dir)).toEqual(files);
    }
  }, 60_000);
});
