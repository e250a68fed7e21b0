/**
 * A restore never costs the live database, and a damaged data directory fails the start with one
 * structured line that says what to do (ops audit H2, M2, L6). Before: a console restore staged
 * any file that began with the SQLite header, and the next start then failed forever (another
 * master key, a corrupt file), moved the live database aside and refused (a newer schema), or
 * came up as an empty new installation (any other SQLite file); a corrupt kura.db ended in a
 * Bun stack trace; an empty kura.db beside stored images started a new installation.
 */
import { Database } from "bun:sqlite";
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { copyFileSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, truncateSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { adminSession, expectError, Session, type Session as SessionType } from "../helpers/client";
import { KuraServer, runCli } from "../helpers/server";

const PASSWORD = "restore-safety-1";
const temps: string[] = [];
const tempDir = (prefix: string) => {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  temps.push(dir);
  return dir;
};
afterAll(() => {
  for (const dir of temps) rmSync(dir, { recursive: true, force: true });
});

/** A copy of `snapshot` changed with SQL (another key's fingerprint, a newer schema). */
function alteredCopy(snapshot: string, target: string, sql: string) {
  copyFileSync(snapshot, target);
  const db = new Database(target);
  db.exec("PRAGMA journal_mode = DELETE");
  db.exec(sql);
  db.close();
}

const OTHER_KEY = "UPDATE meta SET value = 'feedface' WHERE key = 'master_key_fingerprint'";
const NEWER_SCHEMA = "INSERT INTO schema_migrations (version, name, applied_at) VALUES (99, 'future', '2099-01-01 00:00:00')";
/** The startup failure as one structured line, and no JavaScript stack in the output. */
const expectCleanFailure = (logs: string, reason: RegExp) => {
  expect(logs).toMatch(new RegExp(`level=ERROR msg=启动失败 err=.*${reason.source}`));
  expect(logs).not.toMatch(/SQLiteError|^\s+at /m);
};

describe("restores and damaged data directories", () => {
  let dataDir: string;
  let server: KuraServer;
  let admin: SessionType;
  let snapshot = "";
  const backups = () => join(dataDir, "storage/_kura/backups");

  beforeAll(async () => {
    dataDir = tempDir("kura-restore-safety-");
    server = await KuraServer.start({ dataDir });
    admin = await adminSession(server, PASSWORD);
    const snap = await admin.json("POST", "/api/admin/backups", undefined, 201);
    snapshot = join(backups(), snap.name);
  });
  afterAll(() => server.stop());

  test("the console refuses a snapshot that could not become the database, and stages nothing", async () => {
    const candidates: [string, (target: string) => void, RegExp][] = [
      ["kura-20990101-000000.001.db", (t) => alteredCopy(snapshot, t, OTHER_KEY), /主密钥与快照记录的指纹不匹配/],
      ["kura-20990101-000000.002.db", (t) => alteredCopy(snapshot, t, NEWER_SCHEMA), /结构版本 99 比本程序支持的 \d+ 新/],
      [
        "kura-20990101-000000.003.db",
        (t) => {
          const db = new Database(t);
          db.exec("CREATE TABLE notes (x)");
          db.close();
        },
        /不是 Kura 的数据库快照/,
      ],
      ["kura-20990101-000000.004.db", (t) => writeFileSync(t, Buffer.concat([Buffer.from("SQLite format 3\0"), Buffer.alloc(8192, 7)])), /已损坏/],
    ];
    for (const [name, make, reason] of candidates) {
      make(join(backups(), name));
      const message = await expectError(await admin.request("POST", `/api/admin/backups/${name}/restore`), 400);
      expect(message).toMatch(reason);
      expect(existsSync(join(dataDir, "restore.staged.db"))).toBe(false);
    }
    // Still serving, on its own database.
    expect((await fetch(server.url("/healthz"))).status).toBe(200);
    expect((await admin.json("GET", "/api/admin/backups")).items.length).toBeGreaterThan(0);
  });

  test("at start, a staged snapshot that fails its checks is set aside and the live database stays", async () => {
    await server.stop();
    // Staged behind the console's back (an older version, a copy by hand): another key's snapshot.
    alteredCopy(snapshot, join(dataDir, "restore.staged.db"), OTHER_KEY);
    server = await KuraServer.start({ dataDir });
    expect(server.logs).toMatch(/level=ERROR msg=暂存的快照无法换入，继续使用当前数据库 reason="主密钥与快照记录的指纹不匹配/);
    expect(readdirSync(dataDir).filter((f) => /^restore\.rejected-\d{8}-\d{6}\.\d{3}\.db$/.test(f))).toHaveLength(1);
    expect(existsSync(join(dataDir, "restore.staged.db"))).toBe(false);
    expect((await new Session(server).login("admin", PASSWORD)).status).toBe(200);

    // A truncated one: before, the start died in a stack trace, every time.
    await server.stop();
    copyFileSync(snapshot, join(dataDir, "restore.staged.db"));
    truncateSync(join(dataDir, "restore.staged.db"), 8192);
    server = await KuraServer.start({ dataDir });
    expect(server.logs).toMatch(/msg=暂存的快照无法换入，继续使用当前数据库 reason="?快照文件已损坏/);
    expect((await new Session(server).login("admin", PASSWORD)).status).toBe(200);
  });

  test("a staging file a kill left behind (restore.staged.db.partial) is removed at the next start", async () => {
    await server.stop();
    copyFileSync(snapshot, join(dataDir, "restore.staged.db.partial"));
    server = await KuraServer.start({ dataDir });
    expect(existsSync(join(dataDir, "restore.staged.db.partial"))).toBe(false);
    // Nothing was swapped in: the live database answers as before.
    expect(server.logs).not.toContain("已换入快照");
    expect((await new Session(server).login("admin", PASSWORD)).status).toBe(200);
  });

  test("a new machine whose staged snapshot fails does not start as an empty installation", async () => {
    const fresh = tempDir("kura-restore-fresh-");
    copyFileSync(join(dataDir, "master.key"), join(fresh, "master.key"));
    copyFileSync(snapshot, join(fresh, "restore.staged.db"));
    truncateSync(join(fresh, "restore.staged.db"), 8192);
    const failed = await KuraServer.start({ dataDir: fresh }).catch((err: Error) => err.message);
    expect(typeof failed).toBe("string");
    expectCleanFailure(failed as string, /暂存的快照 .* 无法换入：快照文件已损坏/);
    expect(existsSync(join(fresh, "kura.db"))).toBe(false);
  });

  test("a corrupt or an emptied kura.db fails the start with one line that says what to do", async () => {
    await server.stop();
    const corrupt = tempDir("kura-corrupt-");
    copyFileSync(join(dataDir, "master.key"), join(corrupt, "master.key"));
    const bytes = readFileSync(snapshot);
    bytes.fill(0x5a, 100, 8192);
    writeFileSync(join(corrupt, "kura.db"), bytes);
    const failed = await KuraServer.start({ dataDir: corrupt }).catch((err: Error) => err.message);
    expectCleanFailure(failed as string, /已损坏或不是 SQLite 数据库.*请用 kura restore 从快照恢复/);

    // Emptied beside stored images: a lost database, not a first start.
    writeFileSync(join(dataDir, "kura.db"), "");
    rmSync(join(dataDir, "kura.db-wal"), { force: true });
    rmSync(join(dataDir, "kura.db-shm"), { force: true });
    const emptied = await KuraServer.start({ dataDir }).catch((err: Error) => err.message);
    expectCleanFailure(emptied as string, /是空文件，但数据目录中已有存储的图片/);
    expect(emptied).not.toContain("已设置出厂默认密码");
  });

  test("kura restore refuses a newer schema and a directory, without a stack", async () => {
    const newer = join(tempDir("kura-restore-cli-"), "newer.db");
    alteredCopy(snapshot, newer, NEWER_SCHEMA);
    const target = tempDir("kura-restore-target-");
    copyFileSync(join(dataDir, "master.key"), join(target, "master.key"));
    const refused = await runCli(["restore", newer], { KURA_DATA_DIR: target });
    expect(refused.code).toBe(1);
    expect(refused.err).toMatch(/无法恢复：快照的数据库结构版本 99 比本程序支持的 \d+ 新/);
    const directory = await runCli(["restore", tmpdir()], { KURA_DATA_DIR: target });
    expect(directory.code).toBe(1);
    expect(directory.err).toContain("无法恢复：不是文件");
    expect(directory.err).not.toMatch(/EISDIR|^\s+at /m);
    expect(existsSync(join(target, "restore.staged.db"))).toBe(false);
  });
});
