/**
 * Starts that fail, and channels that cannot load, say why in Chinese: the runtime's own text
 * (Bun's "Failed to listen at …", Node's "EEXIST: file already exists, mkdir …", node:crypto's
 * "Unsupported state or unable to authenticate data") never reaches the log line, the channel's
 * `last_error` or the alert an operator reads.
 */
import { Database } from "bun:sqlite";
import { describe, expect, test } from "bun:test";
import { mkdirSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { adminSession, Session } from "../helpers/client";
import { runKuraIn } from "../helpers/cli";
import { expectUserMessage } from "../helpers/messages";
import { KuraServer } from "../helpers/server";
import { useTempDirs } from "../helpers/temp-dirs";

const tempDir = useTempDirs();

/** `kura serve` until it exits (or 15 s); its one ERROR line, with msg and err. */
async function failedStart(dataDir: string, env: Record<string, string> = {}) {
  const run = await runKuraIn(tmpdir(), ["serve"], { HOME: tmpdir(), KURA_DATA_DIR: dataDir, ...env }, [], 15_000);
  const errors = (run.out + run.err).split("\n").filter((l) => l.includes("level=ERROR"));
  expect({ code: run.code, errors: errors.length }).toEqual({ code: 1, errors: 1 });
  const line = errors[0]!;
  const msg = line.match(/msg=("[^"]*"|\S+)/)![1]!;
  const err = line.match(/err=("[^"]*"|\S+)/)![1]!;
  expectUserMessage(msg);
  expectUserMessage(err);
  return err;
}

describe("a start that cannot listen", () => {
  // With delivery threads the port is probed first (Bun.listen: "Failed to listen at <host>"); without, Bun.serve answers.
  test.each([
    ["999.1.1.1:8080", "2"],
    ["999.1.1.1:8080", "0"],
    ["192.0.2.1:8080", "2"],
    ["192.0.2.1:8080", "0"],
    ["[::zz]:8080", "2"],
  ])("KURA_LISTEN=%s (delivery threads %s) names the address and what to check", async (listen, threads) => {
    const err = await failedStart(tempDir("kura-listen-"), { KURA_LISTEN: listen, KURA_DELIVERY_THREADS: threads });
    expect(err).toContain(`无法监听 ${listen}`);
    expect(err).toContain("KURA_LISTEN");
  });
});

describe("a path that should be a directory but is a file", () => {
  test("KURA_DATA_DIR naming a file", async () => {
    const file = join(tempDir("kura-dd-file-"), "data");
    writeFileSync(file, "not a directory");
    const err = await failedStart(file);
    expect(err).toContain(`${file} 已存在，但不是目录`);
  });

  test("kura.db in the data directory is a directory (SQLite: 'disk I/O error')", async () => {
    const dataDir = tempDir("kura-db-dir-");
    mkdirSync(join(dataDir, "kura.db"));
    const err = await failedStart(dataDir);
    expect(err).toContain(`数据库文件 ${join(dataDir, "kura.db")} 是一个目录，不是文件`);
  });
});

describe("sealed values the master key cannot open", () => {
  /** A stopped data directory with a second local channel and a sealed CDN token; `damage` edits its database. */
  async function damaged(damage: (db: Database, channelId: number) => void): Promise<string> {
    const server = await KuraServer.start({ dataDir: tempDir("kura-sealed-") });
    const admin = await adminSession(server);
    const storage = tempDir("kura-sealed-second-");
    const ch = await admin.json("POST", "/api/admin/channels", { name: "second", driver: "local", config: { path: storage } }, 201);
    await admin.json("PUT", "/api/admin/config", { cdn_provider_zone_id: "zone", cdn_provider_api_token: "token-value" });
    await server.stop();
    const db = new Database(join(server.dataDir, "kura.db"));
    damage(db, ch.id);
    db.close();
    return server.dataDir;
  }
  /** The sealed text with its last ciphertext characters changed: the GCM tag no longer matches. */
  const tamper = (sealed: string) => `${sealed.slice(0, -4)}${sealed.endsWith("AAAA") ? "BBBB" : "AAAA"}`;
  const tamperChannel = (db: Database, id: number) => {
    const { config_sealed } = db.query<{ config_sealed: string }, [number]>("SELECT config_sealed FROM channels WHERE id = ?").get(id)!;
    db.query("UPDATE channels SET config_sealed = ? WHERE id = ?").run(tamper(config_sealed), id);
  };

  test("a damaged setting stops the start naming the setting", async () => {
    const dataDir = await damaged((db) => {
      const row = db.query<{ value: string }, []>("SELECT value FROM settings WHERE key = 'cdn_provider_api_token'").get()!;
      const value = JSON.parse(row.value) as { sealed: string };
      db.query("UPDATE settings SET value = ? WHERE key = 'cdn_provider_api_token'").run(JSON.stringify({ sealed: tamper(value.sealed) }));
    });
    const err = await failedStart(dataDir);
    expect(err).toContain("配置项 cdn_provider_api_token 的加密值无法用当前主密钥解密");
  });

  test.each(["local", "webdav"])("a damaged %s channel is skipped at start with a Chinese reason in last_error, the alert and the log", async (driver) => {
    // A channel that fails to load is skipped, not fatal (spec 3.2, 6.3): a local one too, whose
    // path the start reads for its own housekeeping (seed.ts, app-context.ts).
    const dataDir = await damaged((db, id) => {
      tamperChannel(db, id);
      db.query("UPDATE channels SET driver = ? WHERE id = ?").run(driver, id);
    });
    const server = await KuraServer.start({ dataDir });
    try {
      const admin = new Session(server);
      expect((await admin.login("admin", "admin-password-1")).status).toBe(200);
      const second = (await admin.json("GET", "/api/admin/channels")).items.find((c: { name: string }) => c.name === "second");
      expect(second.healthy).toBe(false);
      expect(second.last_error).toStartWith("加载失败：存储渠道 second 的加密配置无法用当前主密钥解密");
      expectUserMessage(second.last_error);
      const alerts = await admin.json("GET", "/api/admin/alerts?status=all");
      const alert = alerts.items.find((a: { target: string }) => a.target === "second");
      expectUserMessage(alert.message);
      const warned = await server.waitForLog(/level=WARN msg=存储渠道加载失败\S* channel=second err=("[^"]*")/);
      expectUserMessage(warned[1]!);
    } finally {
      await server.dispose();
    }
  });
});
