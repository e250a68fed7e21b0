/**
 * Spec sweep, operations (spec 4.4, 4.11, 6.1, 6.2): backup_failed across a restart, the
 * partial-backup answer, the replication_failed and channel_quota_exceeded alerts, the
 * webhook's 10-second timeout, and a partial failure inside batch delete.
 */
import { Database } from "bun:sqlite";
import { expect, test } from "bun:test";
import { mkdtempSync, readdirSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { adminSession, expectError, Session, type Session as SessionT } from "../helpers/client";
import { form, makeJpeg } from "../helpers/images";
import { KuraServer } from "../helpers/server";
import { waitFor, waitReplicaState } from "./channels.helpers";

const PASSWORD = "admin-password-1";
let seed = 700;

interface AlertItem {
  kind: string;
  target: string;
  message: string;
  resolved_at: string;
}

const openAlerts = async (admin: SessionT) => (await admin.json("GET", "/api/admin/alerts")).items as AlertItem[];
const allAlerts = async (admin: SessionT) => (await admin.json("GET", "/api/admin/alerts?status=all&page_size=100")).items as AlertItem[];

/** A local channel whose directory can be swapped for a file (writes fail) and back. */
function shakyDir() {
  const dir = mkdtempSync(join(tmpdir(), "kura-sweep-ops-"));
  return {
    dir,
    breakIt() {
      renameSync(dir, `${dir}.away`);
      writeFileSync(dir, "not a directory");
    },
    heal() {
      rmSync(dir);
      renameSync(`${dir}.away`, dir);
    },
    remove() {
      rmSync(dir, { recursive: true, force: true });
      rmSync(`${dir}.away`, { recursive: true, force: true });
    },
  };
}

test("item 3: backup_failed does not survive a restart, and reappears when a backup fails again", async () => {
  let server = await KuraServer.start();
  const dataDir = server.dataDir;
  const shaky = shakyDir();
  try {
    const admin = await adminSession(server, PASSWORD);
    await admin.json("POST", "/api/admin/channels", { name: "shaky", driver: "local", config: { path: shaky.dir }, priority: 10 }, 201);
    shaky.breakIt();
    await admin.json("POST", "/api/admin/backups", undefined, 201);
    expect((await openAlerts(admin)).map((a) => a.kind)).toContain("backup_failed");
    expect(await server.stop()).toBe(0);
    shaky.heal();

    server = await KuraServer.start({ dataDir });
    const again = new Session(server);
    expect((await again.login("admin", PASSWORD)).status).toBe(200);
    // No backup has run in this process: nothing is reported failed.
    expect((await openAlerts(again)).map((a) => a.kind)).not.toContain("backup_failed");
    const previous = (await allAlerts(again)).find((a) => a.kind === "backup_failed")!;
    expect(previous.resolved_at).not.toBe("");

    shaky.breakIt();
    await again.json("POST", "/api/admin/backups", undefined, 201);
    const reopened = (await openAlerts(again)).find((a) => a.kind === "backup_failed");
    expect(reopened).toMatchObject({ target: "", resolved_at: "" });
  } finally {
    await server.stop();
    rmSync(dataDir, { recursive: true, force: true });
    shaky.remove();
  }
});

test("item 4: a partial backup answers the snapshot with the channels written, and opens backup_failed", async () => {
  const server = await KuraServer.start();
  const shaky = shakyDir();
  try {
    const admin = await adminSession(server);
    await admin.json("POST", "/api/admin/channels", { name: "shaky", driver: "local", config: { path: shaky.dir }, priority: 10 }, 201);
    // Broken behind the service's back: still healthy in its eyes, so the write is attempted and fails.
    shaky.breakIt();
    const snap = await admin.json("POST", "/api/admin/backups", undefined, 201);
    expect(snap.channels).toEqual(["local"]);
    expect(readdirSync(join(server.dataDir, "storage/_kura/backups"))).toContain(snap.name);
    const alert = (await openAlerts(admin)).find((a) => a.kind === "backup_failed")!;
    expect(alert.message).toContain("shaky");
    expect((await admin.json("GET", "/api/admin/backups")).items.map((i: { name: string }) => i.name)).toContain(snap.name);
  } finally {
    await server.dispose();
    shaky.remove();
  }
});

test("replication_failed opens for a channel with failed replicas and resolves once they are done", async () => {
  const server = await KuraServer.start();
  const shaky = shakyDir();
  try {
    const admin = await adminSession(server);
    const ch = await admin.json("POST", "/api/admin/channels", { name: "mirror", driver: "local", config: { path: shaky.dir }, priority: 1 }, 201);
    shaky.breakIt();
    const { id } = await admin.json("POST", "/api/admin/upload", form(await makeJpeg(30, 30, seed++), "r.jpg"));
    await waitReplicaState(admin, id, ch.id, "failed");
    await admin.json("PUT", "/api/admin/config", { health_check_seconds: 1 });
    const alert = await waitFor(
      async () => (await openAlerts(admin)).find((a) => a.kind === "replication_failed"),
      (a) => a !== undefined,
      10_000,
      "replication_failed to open",
    );
    expect(alert).toMatchObject({ target: "mirror", resolved_at: "" });
    expect(alert!.message).toContain("1");

    shaky.heal();
    await admin.json("POST", `/api/admin/channels/${ch.id}/check`);
    await waitReplicaState(admin, id, ch.id, "done");
    await waitFor(
      () => openAlerts(admin),
      (items) => !items.some((a) => a.kind === "replication_failed"),
      10_000,
      "replication_failed to resolve",
    );
    const resolved = (await allAlerts(admin)).find((a) => a.kind === "replication_failed")!;
    expect(resolved.target).toBe("mirror");
    expect(resolved.resolved_at).not.toBe("");
  } finally {
    await server.dispose();
    shaky.remove();
  }
});

test("channel_quota_exceeded opens when usage passes channel_quota_gb and resolves when it no longer does", async () => {
  const server = await KuraServer.start();
  try {
    const admin = await adminSession(server);
    const { id } = await admin.json("POST", "/api/admin/upload", form(await makeJpeg(30, 30, seed++), "q.jpg"));
    await waitReplicaState(admin, id, 1, "done");
    // Usage is the sum of stored sizes; a 2 GiB record stands in for 2 GiB of uploads.
    const db = new Database(join(server.dataDir, "kura.db"));
    db.query("UPDATE blobs SET size = ? WHERE id = (SELECT blob_id FROM images WHERE id = ?)").run(2 * 1024 ** 3, id);
    db.close();
    await admin.json("PUT", "/api/admin/config", { channel_quota_gb: 1, health_check_seconds: 1 });
    const alert = await waitFor(
      async () => (await openAlerts(admin)).find((a) => a.kind === "channel_quota_exceeded"),
      (a) => a !== undefined,
      10_000,
      "channel_quota_exceeded to open",
    );
    expect(alert).toMatchObject({ target: "local", resolved_at: "" });
    expect(alert!.message).toMatch(/[\u4e00-\u9fff]/);

    await admin.json("PUT", "/api/admin/config", { channel_quota_gb: 3 });
    await waitFor(
      () => openAlerts(admin),
      (items) => !items.some((a) => a.kind === "channel_quota_exceeded"),
      10_000,
      "quota alert to resolve",
    );
    expect((await allAlerts(admin)).find((a) => a.kind === "channel_quota_exceeded")!.resolved_at).not.toBe("");
  } finally {
    await server.dispose();
  }
});

test("a webhook that does not answer is given up after 10 seconds and retried on a later round", async () => {
  const received: { at: number; body: Record<string, unknown> }[] = [];
  let release: () => void = () => {};
  const hold = new Promise<void>((resolve) => (release = resolve));
  const receiver = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    idleTimeout: 60,
    async fetch(req) {
      received.push({ at: Date.now(), body: (await req.json()) as Record<string, unknown> });
      // The first delivery hangs far longer than the service waits.
      if (received.length === 1) await Promise.race([hold, Bun.sleep(40_000)]);
      return new Response("ok");
    },
  });
  // The receiver is on loopback, which the webhook policy allows only when told to.
  const server = await KuraServer.start({ env: { KURA_WEBHOOK_ALLOW: "127.0.0.1/32" } });
  const shaky = shakyDir();
  try {
    const admin = await adminSession(server);
    const ch = await admin.json("POST", "/api/admin/channels", { name: "slowhook", driver: "local", config: { path: shaky.dir } }, 201);
    await admin.json("PUT", "/api/admin/config", { alert_webhook_url: `http://127.0.0.1:${receiver.port}/hook`, health_check_seconds: 1 });
    shaky.breakIt();
    await admin.json("POST", `/api/admin/channels/${ch.id}/check`);
    await waitFor(
      async () => received.length,
      (n) => n >= 1,
      10_000,
      "first delivery",
    );
    const first = received[0]!;
    await server.waitForLog(/msg=告警通知发送失败，将在下一轮重试.*target=slowhook.*err=超时/, 25_000);
    const gaveUpAfter = Date.now() - first.at;
    expect(gaveUpAfter).toBeGreaterThanOrEqual(9_500);
    expect(gaveUpAfter).toBeLessThan(20_000);
    const retry = await waitFor(
      async () => received[1],
      (r) => r !== undefined,
      10_000,
      "retry on the next round",
    );
    expect(retry.body).toEqual(first.body);
    expect(retry.body).toMatchObject({ kind: "channel_unhealthy", target: "slowhook", status: "open" });
  } finally {
    release();
    receiver.stop(true);
    await server.dispose();
    shaky.remove();
  }
}, 60_000);

test("a partial failure inside batch delete: the failing item is reported, the others are deleted", async () => {
  const server = await KuraServer.start();
  try {
    const admin = await adminSession(server);
    await admin.json("POST", "/api/admin/users", { name: "dora", password: "password-1" }, 201);
    const dora = new Session(server);
    expect((await dora.login("dora", "password-1")).status).toBe(200);
    const up = async (s: SessionT) => (await s.json("POST", "/api/admin/upload", form(await makeJpeg(30, 30, seed++), "b.jpg"))).id as string;
    const [first, stuck, last, doras] = [await up(admin), await up(admin), await up(admin), await up(dora)];
    // The database refuses to delete one row: a failure inside the batch, not a missing id.
    const db = new Database(join(server.dataDir, "kura.db"));
    db.run(`CREATE TRIGGER sweep_refuse_delete BEFORE DELETE ON images WHEN old.id = '${stuck}' BEGIN SELECT RAISE(ABORT, 'refused'); END`);
    db.close();

    const res = await dora.json("POST", "/api/admin/images/batch-delete", { ids: [doras, first] });
    expect(res).toEqual({ deleted: 1, failed: [{ id: first, error: expect.any(String) }] });

    const out = await admin.json("POST", "/api/admin/images/batch-delete", { ids: [first, stuck, "nope000000", last] });
    expect(out.deleted).toBe(2);
    expect(out.failed.map((f: { id: string }) => f.id)).toEqual([stuck, "nope000000"]);
    for (const f of out.failed) expect(f.error).toMatch(/[\u4e00-\u9fff]/);
    await expectError(await admin.request("GET", `/api/admin/images/${first}`), 404);
    await expectError(await admin.request("GET", `/api/admin/images/${last}`), 404);
    expect((await admin.json("GET", `/api/admin/images/${stuck}`)).id).toBe(stuck);
  } finally {
    await server.dispose();
  }
});
