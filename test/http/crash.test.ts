import { Database } from "bun:sqlite";
import { expect, test } from "bun:test";
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { adminSession, Session } from "../helpers/client";
import { form, makeJpeg } from "../helpers/images";
import { listFiles } from "../helpers/files";
import { KuraServer } from "../helpers/server";
import { waitAllReplicasDone, waitReplicaState } from "./channels.helpers";

// Deterministic crash tests: the test-only hold points of src/testing/hold-points.ts (enabled by
// KURA_TEST_HOOKS) park an upload at an exact step; the test SIGKILLs the server while it is parked
// there, proves from the dead server's files that the crash happened at that step, then restarts
// without hooks and checks recovery.

const PASSWORD = "admin-password-1";

function readDb<T>(dataDir: string, sql: string): T[] {
  const db = new Database(join(dataDir, "kura.db"), { readonly: true });
  try {
    return db.query(sql).all() as T[];
  } finally {
    db.close();
  }
}

/** Storage keys of every upload parked at `point` so far (one log line each). */
function heldKeys(server: KuraServer, point: string): string[] {
  return [...server.logs.matchAll(new RegExp(`kura-test-hook held point=${point.replace(".", "\\.")} key=(\\S+)`, "g"))].map((m) => m[1]!);
}

async function waitHeld(server: KuraServer, point: string, count: number, timeoutMs = 30_000): Promise<string[]> {
  const deadline = Date.now() + timeoutMs;
  while (heldKeys(server, point).length < count) {
    if (Date.now() > deadline || server.proc.exitCode !== null) throw new Error(`no upload held at ${point}:\n${server.logs}`);
    await Bun.sleep(20);
  }
  return heldKeys(server, point);
}

test("a kill between the channel write and the commit leaves intents that the restart cleans up: no orphan, no row without bytes", async () => {
  const server = await KuraServer.start({ env: { KURA_TEST_HOOKS: "upload.before-commit" } });
  let restarted: KuraServer | undefined;
  try {
    const admin = await adminSession(server, PASSWORD);
    const images = await Promise.all([1, 2, 3].map((i) => makeJpeg(120, 90, 700 + i)));
    const inflight = images.map((bytes, i) => admin.request("POST", "/api/admin/upload", form(bytes, `held-${i}.jpg`)).catch(() => undefined));
    // At least one upload is parked after its channel write; give the others a moment to join it.
    await waitHeld(server, "upload.before-commit", 1);
    await Promise.race([waitHeld(server, "upload.before-commit", images.length, 5_000).catch(() => undefined)]);
    const held = heldKeys(server, "upload.before-commit");
    await server.stop("SIGKILL");
    const answers = await Promise.all(inflight);
    // Held uploads never answered: the kill interrupted them, not a finished request.
    expect(answers.filter((r) => r?.status === 200).length).toBe(0);

    // The dead server's state proves where it stopped: bytes on the channel, intent rows, no blob rows.
    const storage = join(server.dataDir, "storage");
    const intents = readDb<{ storage_key: string }>(server.dataDir, "SELECT storage_key FROM upload_intents").map((r) => r.storage_key);
    expect(held.length).toBeGreaterThanOrEqual(1);
    for (const key of held) {
      expect(listFiles(storage)).toContain(key);
      expect(intents).toContain(key);
    }
    expect(readDb(server.dataDir, "SELECT id FROM blobs")).toEqual([]);

    restarted = await KuraServer.start({ dataDir: server.dataDir });
    const s = new Session(restarted);
    expect((await s.login("admin", PASSWORD)).status).toBe(200);
    expect((await s.json("GET", "/api/admin/images")).items).toEqual([]);
    // Recovery: every intent resolved by deleting the uncommitted object, staging emptied.
    expect(readDb(server.dataDir, "SELECT id FROM upload_intents")).toEqual([]);
    expect(readDb(server.dataDir, "SELECT id FROM blobs")).toEqual([]);
    expect(listFiles(storage).filter((f) => f.startsWith("img/"))).toEqual([]);
    expect(readdirSync(join(server.dataDir, "tmp"))).toEqual([]);

    // The recovered server still stores and serves uploads normally.
    const fresh = await makeJpeg(50, 50, 799);
    const { id } = await s.json("POST", "/api/admin/upload", form(fresh, "after.jpg", { exif_policy: "passthrough" }));
    const served = await fetch(restarted.url(`/i/${id}`));
    expect(Buffer.from(await served.arrayBuffer()).equals(fresh)).toBe(true);
  } finally {
    await restarted?.dispose();
    await server.dispose();
  }
});

test("a kill between the commit and the replication keeps the row with its bytes and the restart finishes the copy", async () => {
  const spare = mkdtempSync(join(tmpdir(), "kura-crash-spare-"));
  const server = await KuraServer.start({ env: { KURA_TEST_HOOKS: "replicate.before-put" } });
  let restarted: KuraServer | undefined;
  try {
    const admin = await adminSession(server, PASSWORD);
    const channel = await admin.json("POST", "/api/admin/channels", { name: "spare", driver: "local", config: { path: spare }, priority: 1 }, 201);
    const bytes = await makeJpeg(80, 60, 731);
    // The upload commits (200) after the synchronous write to the best channel ("local").
    const { id } = await admin.json("POST", "/api/admin/upload", form(bytes, "commit.jpg", { exif_policy: "passthrough" }));
    const [key] = await waitHeld(server, "replicate.before-put", 1);
    const target = Number(server.logs.match(/held point=replicate\.before-put key=\S+ channel=(\d+)/)![1]);
    await server.stop("SIGKILL");
    const dirOf = (channelId: number) => (channelId === channel.id ? spare : join(server.dataDir, "storage"));

    // Interrupted exactly there: the row and the synchronous copy exist, the replica being copied does not.
    const [blob] = readDb<{ id: number; storage_key: string }>(server.dataDir, "SELECT id, storage_key FROM blobs");
    expect(blob?.storage_key).toBe(key!);
    const replicas = readDb<{ channel_id: number; state: string }>(server.dataDir, `SELECT channel_id, state FROM blob_channels WHERE blob_id = ${blob!.id}`);
    expect(replicas.length).toBe(2);
    expect(replicas.find((r) => r.channel_id === target)?.state).not.toBe("done");
    const synced = replicas.find((r) => r.channel_id !== target)!;
    expect(synced.state).toBe("done");
    expect(readFileSync(join(dirOf(synced.channel_id), key!)).equals(bytes)).toBe(true);
    expect(listFiles(dirOf(target)).filter((f) => f.startsWith("img/"))).toEqual([]);

    restarted = await KuraServer.start({ dataDir: server.dataDir });
    const s = new Session(restarted);
    expect((await s.login("admin", PASSWORD)).status).toBe(200);
    // The killed job's lease (60 s, src/jobs/queue.ts) has to lapse before it is claimed again.
    await waitReplicaState(s, id, target, "done", 120_000);
    for (const dir of [spare, join(server.dataDir, "storage")]) expect(readFileSync(join(dir, key!)).equals(bytes)).toBe(true);
    expect(readDb(server.dataDir, "SELECT id FROM upload_intents")).toEqual([]);
    const served = await fetch(restarted.url(`/i/${id}`));
    expect(Buffer.from(await served.arrayBuffer()).equals(bytes)).toBe(true);
  } finally {
    await restarted?.dispose();
    await server.dispose();
    rmSync(spare, { recursive: true, force: true });
  }
}, 180_000);

test("a kill inside a physical delete, after the blob's row went and before its objects did: the restart removes them and the cached variants", async () => {
  const spare = mkdtempSync(join(tmpdir(), "kura-crash-spare-"));
  const server = await KuraServer.start({ env: { KURA_TEST_HOOKS: "blob.after-claim" } });
  let restarted: KuraServer | undefined;
  try {
    const admin = await adminSession(server, PASSWORD);
    await admin.json("POST", "/api/admin/channels", { name: "spare", driver: "local", config: { path: spare }, priority: 1 }, 201);
    await admin.json("PUT", "/api/admin/config", { delete_grace_minutes: 0 });
    const bytes = await makeJpeg(800, 600, 741);
    const { id } = await admin.json("POST", "/api/admin/upload", form(bytes, "gone.jpg", { exif_policy: "passthrough" }));
    // Both copies, not only the spare's: a copy still in flight when the delete claims the blob is
    // removed by its own replication job (images/jobs.ts), which would empty a channel before the kill.
    await waitAllReplicasDone(admin, id, 2);
    expect((await fetch(server.url(`/i/${id}?w=320&format=webp`))).status).toBe(200);
    const variants = join(server.dataDir, "variants");
    expect(listFiles(variants).length).toBe(1);

    expect((await admin.request("DELETE", `/api/admin/images/${id}`)).status).toBe(204);
    const [key] = await waitHeld(server, "blob.after-claim", 1);
    await server.stop("SIGKILL");
    // Stopped right there: no row names the objects or the variant any more.
    expect(readDb(server.dataDir, "SELECT id FROM blobs")).toEqual([]);
    for (const dir of [spare, join(server.dataDir, "storage")]) expect(listFiles(dir)).toContain(key!);
    expect(listFiles(variants).length).toBe(1);

    restarted = await KuraServer.start({ dataDir: server.dataDir });
    for (const dir of [spare, join(server.dataDir, "storage")]) expect(listFiles(dir).filter((f) => f.startsWith("img/"))).toEqual([]);
    expect(listFiles(variants)).toEqual([]);
    expect(readDb(server.dataDir, "SELECT id FROM upload_intents")).toEqual([]);
  } finally {
    await restarted?.dispose();
    await server.dispose();
    rmSync(spare, { recursive: true, force: true });
  }
}, 60_000);
