import { Database } from "bun:sqlite";
import { describe, expect, test } from "bun:test";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, unlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { adminSession } from "../helpers/client";
import { KuraServer, runCli } from "../helpers/server";
import { MIGRATIONS } from "../../src/db/migrations";

/** Every file and directory under `dir` with a content hash, to prove nothing was written. */
const snapshot = (dir: string): Record<string, string> =>
  Object.fromEntries(
    readdirSync(dir, { recursive: true, withFileTypes: true }).map((e) => {
      const full = join(e.parentPath, e.name);
      return [full, e.isDirectory() ? "dir" : new Bun.CryptoHasher("sha256").update(readFileSync(full)).digest("hex")];
    }),
  );

describe("startup", () => {
  test("a new database generates master.key (0600), logs it and stores only its fingerprint", async () => {
    const server = await KuraServer.start();
    try {
      const keyFile = join(server.dataDir, "master.key");
      expect(statSync(keyFile).mode & 0o777).toBe(0o600);
      expect(server.logs).toMatch(/level=INFO msg=已为新数据库生成主密钥文件/);
      // One line for the new schema, not one per migration step.
      expect(server.logs).toMatch(new RegExp(`level=INFO msg=已创建数据库 version=${MIGRATIONS.at(-1)!.version} ms=\\d+\n`));
      expect(server.logs).not.toContain("数据库结构迁移完成");
      const startLine = server.logs.split("\n").find((l) => l.includes('msg="Kura 启动完成"'))!;
      for (const field of ["version=", "commit=", "listen=127.0.0.1:", `data_dir=${server.dataDir}`]) expect(startLine).toContain(field);
      expect(startLine).toMatch(/^time=\S+ level=INFO msg=/);
      const key = readFileSync(keyFile, "utf8").trim();
      expect(server.logs).not.toContain(key);
      const db = new Database(join(server.dataDir, "kura.db"), { readonly: true });
      const fp = db.query<{ value: string }, []>("SELECT value FROM meta WHERE key='master_key_fingerprint'").get()!.value;
      expect(fp).toMatch(/^[0-9a-f]{32}$/);
      expect(key).not.toContain(fp);
      db.close();
    } finally {
      await server.dispose();
    }
  });

  test("a wrong or missing master key refuses to start, exits non-zero and writes nothing", async () => {
    const server = await KuraServer.start();
    await server.stop();
    const dir = server.dataDir;
    const before = snapshot(dir);
    const wrong = await runCli(["serve"], { KURA_DATA_DIR: dir, KURA_LISTEN: "127.0.0.1:0", KURA_MASTER_KEY: "ab".repeat(32) });
    expect(wrong.code).not.toBe(0);
    expect(wrong.err).toMatch(/level=ERROR msg=\S+ err=\S*主密钥与数据库记录的指纹不匹配/);
    expect(snapshot(dir)).toEqual(before);

    // A malformed key is a configuration error like any KURA_* value: exit 2, nothing touched, the value not repeated.
    const malformed = await runCli(["serve"], { KURA_DATA_DIR: dir, KURA_LISTEN: "127.0.0.1:0", KURA_MASTER_KEY: "not-a-key" });
    expect(malformed.code).toBe(2);
    expect(malformed.err).toContain('err="KURA_MASTER_KEY 格式无效：需要 64 位十六进制（当前 9 个字符）"');
    expect(malformed.err).not.toContain("not-a-key");
    expect(snapshot(dir)).toEqual(before);

    const keyText = readFileSync(join(dir, "master.key"), "utf8");
    unlinkSync(join(dir, "master.key"));
    const before2 = snapshot(dir);
    const missing = await runCli(["serve"], { KURA_DATA_DIR: dir, KURA_LISTEN: "127.0.0.1:0", KURA_MASTER_KEY: undefined });
    expect(missing.code).not.toBe(0);
    expect(missing.err).toMatch(/err=\S*主密钥缺失/);
    expect(snapshot(dir)).toEqual(before2);
    expect(existsSync(join(dir, "master.key"))).toBe(false);

    // The right key through the environment works.
    const ok = await KuraServer.start({ dataDir: dir, env: { KURA_MASTER_KEY: keyText.trim() } });
    await ok.dispose();
    rmSync(dir, { recursive: true, force: true });
  });

  test("after a crash left a WAL behind, a wrong key is still refused without touching any file", async () => {
    const server = await KuraServer.start();
    const admin = await adminSession(server);
    await admin.json("POST", "/api/admin/users", { name: "walwriter", password: "password-1" }, 201);
    await server.stop("SIGKILL");
    const before = snapshot(server.dataDir);
    expect(Object.keys(before).some((f) => f.endsWith("kura.db-wal"))).toBe(true);
    const wrong = await runCli(["serve"], { KURA_DATA_DIR: server.dataDir, KURA_LISTEN: "127.0.0.1:0", KURA_MASTER_KEY: "cd".repeat(32) });
    expect(wrong.code).not.toBe(0);
    expect(wrong.err).toContain("主密钥与数据库记录的指纹不匹配");
    expect(snapshot(server.dataDir)).toEqual(before);
    await server.dispose();
  });

  test("a database newer than the binary refuses to start with a clear message", async () => {
    const server = await KuraServer.start();
    await server.stop();
    const db = new Database(join(server.dataDir, "kura.db"));
    db.query("INSERT INTO schema_migrations (version, name, applied_at) VALUES (999, '0999_future.sql', '2030-01-01 00:00:00')").run();
    db.close();
    const res = await runCli(["serve"], { KURA_DATA_DIR: server.dataDir, KURA_LISTEN: "127.0.0.1:0" });
    expect(res.code).not.toBe(0);
    expect(res.err).toContain("请升级");
    await server.dispose();
  });

  test("bad bootstrap values fail fast with an err field and exit 2, which the unit does not restart into", async () => {
    const dir = mkdtempSync(join(tmpdir(), "kura-boot-"));
    for (const env of [{ KURA_LISTEN: "nonsense" }, { KURA_TRUSTED_PROXIES: "10.0.0.0/99" }, { KURA_METRICS_ALLOW: "not-an-ip" }]) {
      const res = await runCli(["serve"], { KURA_DATA_DIR: dir, KURA_LISTEN: "127.0.0.1:0", ...env });
      expect(res.code).toBe(2);
      expect(res.err).toMatch(/ level=ERROR msg=启动失败 err=/);
    }
    // The other commands say which one failed, as their other failures do.
    const backup = await runCli(["backup"], { KURA_DATA_DIR: dir, KURA_LISTEN: "nonsense" });
    expect(backup.code).toBe(2);
    expect(backup.err).toMatch(/ level=ERROR msg=命令失败 command=backup err=/);
    expect(readdirSync(dir)).toEqual([]);
    rmSync(dir, { recursive: true, force: true });
  });

  test("kura version prints the version", async () => {
    const res = await runCli(["version"], {});
    expect(res.code).toBe(0);
    expect(res.out).toMatch(/^kura \d+\.\d+\.\d+（提交 [0-9a-z]+，构建于 [0-9TZ:.-]+）\n$/);
  });
});
