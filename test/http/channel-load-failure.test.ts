import { Database } from "bun:sqlite";
import { expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { adminSession, Session } from "../helpers/client";
import { metricValue } from "../helpers/metrics";
import { KuraServer } from "../helpers/server";
import { waitFor } from "./channels.helpers";

test("a channel that fails to load is skipped at start, marked, and loaded again by a later health round", async () => {
  const server = await KuraServer.start();
  const dir = mkdtempSync(join(tmpdir(), "kura-lf-"));
  try {
    const admin = await adminSession(server);
    const ch = await admin.json("POST", "/api/admin/channels", { name: "second", driver: "local", config: { path: dir } }, 201);
    await admin.json("PUT", "/api/admin/config", { health_check_seconds: 1 });
    await server.stop();
    // Simulate a configuration this binary cannot load (e.g. a driver removed in a downgrade).
    const db = new Database(join(server.dataDir, "kura.db"));
    db.query("UPDATE channels SET driver = 'nosuchdriver' WHERE id = ?").run(ch.id);
    db.close();

    const again = await KuraServer.start({ dataDir: server.dataDir });
    try {
      const s = new Session(again);
      await s.login("admin", "admin-password-1");
      await again.waitForLog(/msg=存储渠道加载失败，已跳过，将在健康检查时重试 channel=second/);
      const listed = (await s.json("GET", "/api/admin/channels")).items.find((c: { id: number }) => c.id === ch.id);
      expect(listed.healthy).toBe(false);
      expect(listed.last_error.startsWith("加载失败：")).toBe(true);
      // Loaded channels only: the broken one is not counted.
      expect(await metricValue(again.base, "kura_channels_total")).toBe(1);
      // The service keeps working on the healthy channel.
      expect((await fetch(again.url("/healthz"))).status).toBe(200);

      // Repair the row while running: the next health round loads it.
      const fix = new Database(join(server.dataDir, "kura.db"));
      fix.query("UPDATE channels SET driver = 'local' WHERE id = ?").run(ch.id);
      fix.close();
      const healed = await waitFor(
        () => s.json("GET", "/api/admin/channels"),
        (l) => l.items.find((c: { id: number }) => c.id === ch.id)?.healthy === true,
        15_000,
        "channel loaded again",
      );
      expect(healed.items.find((c: { id: number }) => c.id === ch.id).last_error).toBe("");
      expect(await metricValue(again.base, "kura_channels_total")).toBe(2);
    } finally {
      await again.dispose();
    }
  } finally {
    await server.dispose();
    rmSync(dir, { recursive: true, force: true });
  }
});
