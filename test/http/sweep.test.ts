import { Database } from "bun:sqlite";
import { expect, test } from "bun:test";
import { join } from "node:path";
import { adminSession, expectError } from "../helpers/client";
import { form, makePng } from "../helpers/images";
import { KuraServer } from "../helpers/server";
import { waitFor } from "./channels.helpers";

test("the cleanup sweep deletes expired references and flags cold images for review", async () => {
  const server = await KuraServer.start();
  try {
    const admin = await adminSession(server);
    const expiring = await admin.json("POST", "/api/admin/upload", form(await makePng(10, 10, 1), "short.png", { ttl: "1" }));
    const cold = await admin.json("POST", "/api/admin/upload", form(await makePng(10, 10, 2), "cold.png"));
    const exempt = await admin.json("POST", "/api/admin/upload", form(await makePng(10, 10, 3), "exempt.png"));
    await admin.json("PATCH", `/api/admin/images/${exempt.id}`, { cleanup_exempt: true });
    // Both were uploaded long ago and never accessed.
    const db = new Database(join(server.dataDir, "kura.db"));
    db.query("UPDATE images SET created_at = '2000-01-01 00:00:00' WHERE id IN (?, ?)").run(cold.id, exempt.id);
    // Housekeeping rows past their lifetime, next to fresh ones that must stay.
    db.query("INSERT INTO idempotency_keys (user_id, key, image_id, created_at) VALUES ('default', 'old-key', 'x', '2000-01-01 00:00:00')").run();
    db.query("INSERT INTO audit (actor, actor_name, action, created_at) VALUES ('default', 'admin', 'ancient.thing', '2000-01-01 00:00:00')").run();
    db.query("INSERT INTO sessions (id_hash, user_id, created_at, expires_at) VALUES ('stale', 'default', '2000-01-01 00:00:00', '2000-01-31 00:00:00')").run();
    db.close();
    await admin.json("PUT", "/api/admin/config", { cold_cleanup_days: 30, cleanup_sweep_seconds: 1 });

    await waitFor(
      () => admin.request("GET", `/api/admin/images/${expiring.id}`).then((r) => r.status),
      (s) => s === 404,
      10_000,
      "expired image swept",
    );
    await expectError(await admin.request("GET", `/api/admin/images/${expiring.id}`), 404);
    const flagged = await waitFor(
      () => admin.json("GET", `/api/admin/images/${cold.id}`),
      (d) => d.pending_cleanup === true,
      10_000,
      "cold flag",
    );
    expect(flagged.cleanup_exempt).toBe(false);
    expect((await admin.json("GET", `/api/admin/images/${exempt.id}`)).pending_cleanup).toBe(false);
    await server.waitForLog(/msg=清理扫描完成 expired=1/);
    const after = new Database(join(server.dataDir, "kura.db"), { readonly: true });
    expect(after.query("SELECT 1 FROM audit WHERE action = 'image.expire' AND target = ?").get(expiring.id)).not.toBeNull();
    expect(after.query("SELECT 1 FROM audit WHERE action = 'ancient.thing'").get()).toBeNull();
    expect(after.query("SELECT 1 FROM idempotency_keys WHERE key = 'old-key'").get()).toBeNull();
    expect(after.query("SELECT 1 FROM sessions WHERE id_hash = 'stale'").get()).toBeNull();
    // The admin's own live session survives.
    expect(after.query<{ n: number }, []>("SELECT COUNT(*) AS n FROM sessions").get()!.n).toBeGreaterThan(0);
    after.close();
    await admin.json("GET", "/api/admin/me");
  } finally {
    await server.dispose();
  }
});
