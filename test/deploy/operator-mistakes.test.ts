/**
 * Mistakes an operator makes, each ending in one clear Chinese `启动失败` line and no damage
 * (audit 11): a data directory that is someone else's (an empty KURA_DATA_DIR, a home directory),
 * files a root-run command left behind, a lock file that cannot be written or is damaged, a master
 * key that is a directory, a port already taken; and SIGHUP (a closed terminal) stops gracefully.
 */
import { Database } from "bun:sqlite";
import { describe, expect, test } from "bun:test";
import { chmodSync, chownSync, existsSync, mkdirSync, readdirSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { runKuraIn } from "../helpers/cli";
import { KuraServer } from "../helpers/server";
import { useTempDirs } from "../helpers/temp-dirs";

const tempDir = useTempDirs();

const NOBODY = 65534;
const mode = (path: string) => (statSync(path).mode & 0o777).toString(8);

/** `kura serve` as `uid` (a service user; undefined: this process's) until it exits or `ms` pass; the output. */
async function serveAs(uid: number | undefined, dataDir: string, ms = 15_000, env: Record<string, string> = {}) {
  const as = uid === undefined ? [] : ["setpriv", `--reuid=${uid}`, `--regid=${uid}`, "--clear-groups"];
  const run = await runKuraIn(tmpdir(), ["serve"], { HOME: tmpdir(), KURA_DATA_DIR: dataDir, ...env }, as, ms);
  return { code: run.code, text: run.out + run.err };
}

/** One ERROR line, in Chinese, and no stack trace or source excerpt. */
function expectOneFailureLine(text: string, says: RegExp) {
  const errors = text.split("\n").filter((l) => l.includes("level=ERROR"));
  expect(errors).toHaveLength(1);
  expect(errors[0]).toMatch(/msg="?启动失败/);
  expect(errors[0]).toMatch(says);
  expect(text).not.toMatch(/\n\s+at |error: |\^\n/);
}

/** A data directory owned by `nobody`, initialised by one start and stop. */
async function nobodysDataDir(): Promise<string> {
  const parent = tempDir("kura-op-");
  chmodSync(parent, 0o755);
  const dataDir = join(parent, "data");
  mkdirSync(dataDir, { mode: 0o700 });
  chownSync(dataDir, NOBODY, NOBODY);
  const first = await serveAs(NOBODY, dataDir, 4_000);
  expect(first.text).toContain("Kura 启动完成");
  return dataDir;
}

describe("a data directory that is not Kura's is refused, untouched", () => {
  test("an empty KURA_DATA_DIR is an error, not the working directory", async () => {
    const cwd = tempDir("kura-op-cwd-");
    writeFileSync(join(cwd, "notes.txt"), "mine");
    chmodSync(join(cwd, "notes.txt"), 0o644);
    const run = await runKuraIn(cwd, ["serve"], { KURA_DATA_DIR: "" });
    const text = run.out + run.err;
    expect(run.code).not.toBe(0);
    expect(text).toContain("KURA_DATA_DIR 为空");
    expect(readdirSync(cwd)).toEqual(["notes.txt"]);
    expect(mode(join(cwd, "notes.txt"))).toBe("644");
  });

  test("a directory with other files (a home directory with a tmp/ in it) keeps them, modes and all", async () => {
    const home = tempDir("kura-op-home-");
    chmodSync(home, 0o755);
    mkdirSync(join(home, "tmp"));
    writeFileSync(join(home, "tmp", "important.txt"), "precious");
    writeFileSync(join(home, "notes.txt"), "mine");
    chmodSync(join(home, "notes.txt"), 0o644);
    const run = await serveAs(undefined, home);
    expect(run.code).toBe(1);
    expectOneFailureLine(run.text, /不是 Kura 的数据目录/);
    expect(readdirSync(home).sort()).toEqual(["notes.txt", "tmp"]);
    expect(readdirSync(join(home, "tmp"))).toEqual(["important.txt"]);
    expect([mode(home), mode(join(home, "notes.txt"))]).toEqual(["755", "644"]);
  });

  test("an empty directory, one with only lost+found, or only a mounted storage/ is a new data directory", async () => {
    for (const prepare of [() => {}, (d: string) => mkdirSync(join(d, "lost+found")), (d: string) => mkdirSync(join(d, "storage"))]) {
      const dir = tempDir("kura-op-new-");
      prepare(dir);
      const server = await KuraServer.start({ dataDir: dir });
      await server.stop();
      expect(existsSync(join(dir, "kura.db"))).toBe(true);
    }
  });

  test("in Kura's own directory, an operator's file beside its own is not made private", async () => {
    const server = await KuraServer.start();
    await server.stop();
    writeFileSync(join(server.dataDir, "README-ops.txt"), "backups go to s3");
    chmodSync(join(server.dataDir, "README-ops.txt"), 0o644);
    chmodSync(join(server.dataDir, "kura.db"), 0o644);
    const again = await KuraServer.start({ dataDir: server.dataDir });
    await again.stop();
    expect(mode(join(server.dataDir, "README-ops.txt"))).toBe("644");
    expect(mode(join(server.dataDir, "kura.db"))).toBe("600");
    rmSync(server.dataDir, { recursive: true, force: true });
  });
});

describe("files the service user cannot use end the start with what to do", () => {
  test("a root-owned tmp/ left by a root-run command: one line naming it, with the chown to run", async () => {
    const dataDir = await nobodysDataDir();
    // As `sudo kura check` leaves it: tmp/ recreated by root, with a file in it.
    rmSync(join(dataDir, "tmp"), { recursive: true, force: true });
    mkdirSync(join(dataDir, "tmp"), { mode: 0o700 });
    writeFileSync(join(dataDir, "tmp", "upload-x"), "x");
    const run = await serveAs(NOBODY, dataDir);
    expect(run.code).toBe(1);
    expectOneFailureLine(run.text, new RegExp(`没有权限访问 .*tmp.*chown -R kura:kura ${dataDir}`));
  });

  test("a kura.lock the service user may not write: refused, so a second server cannot share the directory", async () => {
    const dataDir = await nobodysDataDir();
    chmodSync(join(dataDir, "kura.lock"), 0o400);
    const run = await serveAs(NOBODY, dataDir);
    expect(run.code).toBe(1);
    expectOneFailureLine(run.text, /锁文件 .*kura\.lock 不可写/);
  });

  test("a damaged kura.lock: refused with what to do, not SQLite's error", async () => {
    const server = await KuraServer.start();
    await server.stop();
    writeFileSync(join(server.dataDir, "kura.lock"), "garbage that is not a database file at all....".repeat(3));
    const run = await serveAs(undefined, server.dataDir);
    expect(run.code).toBe(1);
    expectOneFailureLine(run.text, /锁文件 .*kura\.lock 已损坏.*删除它/);
    rmSync(server.dataDir, { recursive: true, force: true });
  });

  test("a master.key that is a directory", async () => {
    const dir = tempDir("kura-op-key-");
    mkdirSync(join(dir, "master.key"));
    const run = await serveAs(undefined, dir);
    expect(run.code).toBe(1);
    expectOneFailureLine(run.text, /主密钥文件 .*master\.key 是一个目录/);
  });

  test("a port already taken says so, and the first start's factory password waits for a start that listens", async () => {
    const taken = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: () => new Response("other") });
    const dir = tempDir("kura-op-port-");
    try {
      const run = await serveAs(undefined, dir, 15_000, { KURA_LISTEN: `127.0.0.1:${taken.port}`, KURA_DELIVERY_THREADS: "0" });
      expect(run.code).toBe(1);
      expectOneFailureLine(run.text, new RegExp(`端口 ${taken.port} 已被其他程序占用`));
      // Before, the password was logged by this failed run and never again.
      expect(run.text).not.toContain("已设置出厂默认密码");
    } finally {
      taken.stop(true);
    }
    const server = await KuraServer.start({ dataDir: dir });
    try {
      const password = /msg=已设置出厂默认密码，请登录后立即修改 user=admin password=(\S+)/.exec(server.logs)?.[1];
      expect(password).toBeDefined();
      const login = await fetch(server.url("/api/admin/auth/login"), {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ name: "admin", password }),
      });
      expect(login.status).toBe(200);
    } finally {
      await server.stop();
    }
    // A start stopped between the admin's row and its password hash left nobody able to log in: the next start completes it.
    const db = new Database(join(dir, "kura.db"));
    db.query("UPDATE users SET password_hash = '!' WHERE id = (SELECT id FROM users ORDER BY created_at LIMIT 1)").run();
    db.close();
    const again = await KuraServer.start({ dataDir: dir });
    try {
      expect(again.logs).toMatch(/msg=已设置出厂默认密码，请登录后立即修改 user=admin password=\S+/);
    } finally {
      await again.dispose();
    }
  });
});

test("SIGHUP (a closed terminal) stops gracefully: logged, flushed, exit 0", async () => {
  const server = await KuraServer.start();
  server.proc.kill("SIGHUP");
  expect(await server.proc.exited).toBe(0);
  const logs = server.logs;
  expect(logs).toContain("正在优雅关闭");
  expect(logs).toContain("reason=SIGHUP");
  expect(logs).toContain("已关闭");
  rmSync(server.dataDir, { recursive: true, force: true });
});
