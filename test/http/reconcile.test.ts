import { Database } from "bun:sqlite";
import { expect, test } from "bun:test";
import { existsSync, mkdirSync, utimesSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { reconcileChannel, reconcileRound } from "../../src/channels/reconcile";
import { adminSession } from "../helpers/client";
import { openContext } from "../helpers/context";
import { listFiles } from "../helpers/files";
import { form, makeJpeg } from "../helpers/images";
import { KuraServer } from "../helpers/server";

const HOUR = 3600_000;

function place(root: string, key: string, ageMs: number) {
  const path = join(root, key);
  mkdirSync(dirname(path), { recursive: true });
  writeFileSync(path, "x".repeat(10));
  const t = (Date.now() - ageMs) / 1000;
  utimesSync(path, t, t);
  return path;
}

test("reconciliation deletes our orphans, counts foreign objects and re-queues phantoms", async () => {
  const server = await KuraServer.start();
  const admin = await adminSession(server);
  const kept = await admin.json("POST", "/api/admin/upload", form(await makeJpeg(20, 20, 1), "kept.jpg"));
  const lost = await admin.json("POST", "/api/admin/upload", form(await makeJpeg(20, 20, 2), "lost.jpg"));
  const lostSha = (await admin.json("GET", `/api/admin/images/${lost.id}`)).sha256;
  await server.stop();

  const root = join(server.dataDir, "storage");
  // The channel was bound to this database a day ago.
  const db = new Database(join(server.dataDir, "kura.db"));
  const dayAgo = new Date(Date.now() - 24 * HOUR).toISOString().slice(0, 19).replace("T", " ");
  db.query("UPDATE channels SET bound_at = ?").run(dayAgo);
  db.close();
  const sha = "ab".repeat(32);
  const orphan = place(root, `img/ab/ab/${sha}-0000000a.jpg`, 2 * HOUR);
  const fresh = place(root, `img/ab/ab/${sha}-0000000b.jpg`, 60_000); // may be an upload in flight
  const beforeBinding = place(root, `img/ab/ab/${sha}-0000000c.jpg`, 3 * 24 * HOUR);
  const otherFormat = place(root, "someone-else/notes.txt", 2 * HOUR);
  const snapshot = place(root, "_kura/backups/kura-20260101-000000.000.db", 2 * HOUR);
  const lostFile = listFiles(root).find((f) => f.includes(lostSha))!;
  Bun.spawnSync(["rm", join(root, lostFile)]);

  const { app, logs, close } = await openContext(server.dataDir);
  try {
    const local = app.channels.list().find((c) => c.row.name === "local")!;
    const result = await reconcileChannel(app, local);
    expect(result).toMatchObject({ orphans_deleted: 1, foreign: 2, phantoms_requeued: 1 });
    expect(result.objects).toBe(6);
    expect(existsSync(orphan)).toBe(false);
    for (const path of [fresh, beforeBinding, otherFormat, snapshot]) expect(existsSync(path)).toBe(true);
    const state = app.db
      .query<{ state: string }, [string]>("SELECT bc.state FROM blob_channels bc JOIN blobs b ON b.id = bc.blob_id WHERE b.sha256 = ?")
      .get(lostSha);
    expect(state?.state).toBe("pending");
    expect(app.jobs.counts().waiting).toBeGreaterThan(0);
    // The round logs the result line of spec 6.3.
    await reconcileRound(app);
    const line = logs.find((l) => l.msg === "每日对账完成");
    expect(Object.keys(line!.fields)).toEqual(expect.arrayContaining(["objects", "bytes", "foreign", "orphans_deleted", "phantoms_requeued"]));
    // The referenced object survived both passes and its replica is still done.
    const keptRow = app.db
      .query<{ storage_key: string; state: string }, [string]>(
        "SELECT b.storage_key, bc.state FROM images i JOIN blobs b ON b.id = i.blob_id JOIN blob_channels bc ON bc.blob_id = b.id WHERE i.id = ?",
      )
      .get(kept.id);
    expect(keptRow?.state).toBe("done");
    expect(existsSync(join(root, keptRow!.storage_key))).toBe(true);
  } finally {
    close();
    await server.dispose();
  }
});

test("reconciliation gives every failed replica a fresh job: the daily retry of copies whose own retries ran out", async () => {
  const server = await KuraServer.start();
  const admin = await adminSession(server);
  const up = await admin.json("POST", "/api/admin/upload", form(await makeJpeg(20, 20, 3), "failed.jpg"));
  await server.stop();
  // A replica left failed with its job discarded (all its attempts spent while its source was unreadable).
  const db = new Database(join(server.dataDir, "kura.db"));
  const blobId = db.query<{ blob_id: number }, [string]>("SELECT blob_id FROM images WHERE id = ?").get(up.id)!.blob_id;
  db.query("UPDATE blob_channels SET state = 'failed', last_error = '没有可读取该图片的健康存储渠道' WHERE blob_id = ?").run(blobId);
  db.query("UPDATE jobs SET state = 'discarded' WHERE kind = 'blob.replicate'").run();
  db.close();

  const { app, close } = await openContext(server.dataDir);
  try {
    const local = app.channels.list().find((c) => c.row.name === "local")!;
    const result = await reconcileChannel(app, local);
    expect(result.failed_requeued).toBe(1);
    const queued = app.db
      .query<{ payload: string }, []>("SELECT payload FROM jobs WHERE kind = 'blob.replicate' AND state IN ('available', 'scheduled', 'retryable')")
      .all()
      .map((j) => JSON.parse(j.payload));
    expect(queued).toEqual([{ blob_id: blobId, channel_id: local.row.id }]);
  } finally {
    close();
    await server.dispose();
  }
});
