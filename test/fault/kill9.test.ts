/**
 * Fault tier: `kill -9` in the middle of replication, a backup and a drain, then a restart on
 * the same data dir. The channel peer is a real S3 server (s3rver) behind a proxy that holds the
 * exact request we want to interrupt, so the kill lands at that point every time (no sleeps).
 * After the restart the state is consistent and the interrupted work finishes by itself.
 */
import { Database } from "bun:sqlite";
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createS3Driver } from "../../src/channels/drivers/s3";
import { TEST_CREDENTIALS, type RunningS3 } from "../channels/s3rver-harness";
import { adminSession, Session } from "../helpers/client";
import { form, makeJpeg } from "../helpers/images";
import { KuraServer } from "../helpers/server";
import { waitFor, waitReplicaState } from "../http/channels.helpers";
import type { FaultProxy } from "./harness";
import { addProxiedChannel, startProxiedS3, type ProxiedS3 } from "./proxied-s3";

const BUCKET = "kura-fault";
const PASSWORD = "admin-password-1";

let peer: ProxiedS3;
let s3: RunningS3;
let proxy: FaultProxy;
let server: KuraServer;
let admin: Session;
let channelId = 0;
const dataDir = () => server.dataDir;

/** What really is in the bucket, straight from the S3 server (not through the proxy). */
async function bucketKeys(): Promise<string[]> {
  const driver = createS3Driver({
    provider: "Minio",
    endpoint: s3.endpoint,
    access_key_id: TEST_CREDENTIALS.accessKeyId,
    secret_access_key: TEST_CREDENTIALS.secretAccessKey,
    path: BUCKET,
  });
  const keys: string[] = [];
  for await (const o of driver.list("")) keys.push(o.key);
  return keys.sort();
}

function query<T>(sql: string, ...args: (string | number)[]): T[] {
  const db = new Database(join(dataDir(), "kura.db"), { readonly: true });
  try {
    return db.query(sql).all(...args) as T[];
  } finally {
    db.close();
  }
}

/**
 * `held`, or a failure with the answer and the server's log when the request that should have
 * reached the peer was answered first (it failed or went elsewhere), or when nothing happened
 * for 30 s: then `held` would never resolve and the test would only time out, saying nothing.
 */
async function heldBefore(held: Promise<string>, answer: Promise<Response | undefined>, what: string): Promise<string> {
  const early = answer.then(async (res) => {
    // A held request is never answered while the server lives; give `held` a moment to win the race.
    await Bun.sleep(200);
    const body = res ? `${res.status} ${await res.text()}` : "no response";
    throw new Error(`${what} was never sent; the request was answered: ${body}\nserver log:\n${server.logs.slice(-4000)}`);
  });
  early.catch(() => {});
  // Neither within 30 s (the test's own timeout is 60): say what the server was doing.
  const silent = Bun.sleep(30_000).then(() => {
    throw new Error(`${what} was neither sent nor answered within 30 s\nserver log:\n${server.logs.slice(-4000)}`);
  });
  silent.catch(() => {});
  return Promise.race([held, early, silent]);
}

/**
 * kill -9 the server once `held` resolves (the request is stuck at the peer), run `whileDown`
 * on the dead server's files, then start it again.
 */
async function killWhenHeld(held: Promise<string>, whileDown: () => Promise<void> | void = () => {}): Promise<string> {
  const request = await held;
  await server.stop("SIGKILL");
  expect(server.proc.signalCode).toBe("SIGKILL");
  await whileDown();
  server = await KuraServer.start({ dataDir: dataDir() });
  admin = new Session(server);
  expect((await admin.login("admin", PASSWORD)).status).toBe(200);
  return request;
}

beforeAll(async () => {
  peer = await startProxiedS3("kill", BUCKET);
  ({ s3, proxy } = peer);
  server = await KuraServer.start({ dataDir: mkdtempSync(join(tmpdir(), "kura-fault-kill-data-")) });
  admin = await adminSession(server, PASSWORD);
  // The local channel (priority 0, the default) takes uploads synchronously; S3 gets replicas in the background.
  channelId = await addProxiedChannel(admin, peer, "s3-behind-proxy", -10);
});

afterAll(async () => {
  await server.stop("SIGKILL").catch(() => {});
  await peer.stop();
  rmSync(server.dataDir, { recursive: true, force: true });
});

describe("kill -9 and restart", () => {
  const ids: string[] = [];

  test("during replication: the replica is not done until the object is there, and the copy resumes at once", async () => {
    const held = proxy.hold((chunk) => chunk.startsWith("PUT ") && chunk.includes("/img/"));
    const bytes = await makeJpeg(90, 60, 11);
    const { id } = await admin.json("POST", "/api/admin/upload", form(bytes, "r.jpg", { exif_policy: "passthrough" }));
    ids.push(id);
    await killWhenHeld(held, async () => {
      const [replica] = query<{ state: string }>(
        "SELECT bc.state FROM blob_channels bc JOIN images i ON i.blob_id = bc.blob_id WHERE i.id = ? AND bc.channel_id = ?",
        id,
        channelId,
      );
      expect(replica?.state).not.toBe("done");
      expect((await bucketKeys()).filter((k) => k.startsWith("img/"))).toEqual([]);
      expect(query<{ state: string }>("SELECT state FROM jobs WHERE kind = 'blob.replicate' AND state = 'running'").length).toBe(1);
    });

    // The job was left "running" by the dead process; it must not wait out its lease.
    await waitReplicaState(admin, id, channelId, "done", 20_000);
    const keys = (await bucketKeys()).filter((k) => k.startsWith("img/"));
    expect(keys.length).toBe(1);
    expect(query<{ n: number }>("SELECT COUNT(*) AS n FROM blob_channels bc JOIN images i ON i.blob_id = bc.blob_id WHERE i.id = ?", id)[0]!.n).toBe(2);
    const read = await fetch(server.url(`/i/${id}`));
    expect(Buffer.from(await read.arrayBuffer()).equals(bytes)).toBe(true);
  });

  test("during a backup: no partial snapshot anywhere, no temp file, and the backup is taken again at start", async () => {
    // A backup writes only to healthy channels: the S3 one must be, or no PUT would ever be held.
    await waitFor(
      async () => (await admin.json("GET", "/api/admin/channels")).items.find((c: { id: number }) => c.id === channelId),
      (c: { healthy: boolean }) => c.healthy,
      20_000,
      "the S3 channel to be healthy after the restart",
    );
    const held = proxy.hold((chunk) => chunk.startsWith("PUT ") && chunk.includes("_kura/backups/"));
    const inFlight = admin.request("POST", "/api/admin/backups").catch(() => undefined);
    let interrupted = "";
    await killWhenHeld(heldBefore(held, inFlight, "the backup's PUT to S3"), async () => {
      expect((await bucketKeys()).filter((k) => k.startsWith("_kura/backups/"))).toEqual([]);
      interrupted = (await Bun.file(join(dataDir(), "backup.in-progress")).text()).trim();
    });
    await inFlight;

    // The restarted server takes the interrupted backup again by itself, on every channel.
    const fresh = await waitFor(
      () => admin.json("GET", "/api/admin/backups"),
      (list: { items: { name: string; channels: string[] }[] }) => list.items.some((i) => i.name > interrupted && i.channels.length === 2),
      20_000,
      "the interrupted backup to be taken again",
    );
    // The new snapshot stages its own temp file in tmp/ while it runs, so tmp/ is checked once that
    // backup has ended (it removes its file, then the marker): then nothing of either run is left.
    await waitFor(
      async () => Bun.file(join(dataDir(), "backup.in-progress")).exists(),
      (running) => !running,
      20_000,
      "the new backup to end",
    );
    expect(readdirSync(join(dataDir(), "tmp"))).toEqual([]);
    // Whatever is listed is complete and downloadable.
    for (const item of fresh.items) {
      const res = await admin.request("GET", `/api/admin/backups/${item.name}`);
      expect(res.status).toBe(200);
      expect((await res.arrayBuffer()).byteLength).toBe((item as unknown as { size: number }).size);
    }
    const onS3 = (await bucketKeys()).filter((k) => k.startsWith("_kura/backups/"));
    expect(onS3.length).toBe(1);
    expect(onS3[0]! > `_kura/backups/${interrupted}`).toBe(true);
    expect(await Bun.file(join(dataDir(), "backup.in-progress")).exists()).toBe(false);
  });

  test("during a drain: the channel stays marked deleting, and the drain finishes after the restart", async () => {
    const second = await admin.json("POST", "/api/admin/upload", form(await makeJpeg(70, 50, 12), "d.jpg"));
    ids.push(second.id);
    await waitReplicaState(admin, second.id, channelId, "done", 20_000);
    expect((await bucketKeys()).length).toBeGreaterThanOrEqual(3); // two images and a snapshot

    const held = proxy.hold((chunk) => chunk.startsWith("DELETE "));
    const started = await admin.request("DELETE", `/api/admin/channels/${channelId}?purge=true`);
    expect(started.status).toBe(202);
    await killWhenHeld(held, () => {
      expect(query<{ deleting: number }>("SELECT deleting FROM channels WHERE id = ?", channelId)[0]?.deleting).toBe(1);
      expect(query<{ state: string }>("SELECT state FROM jobs WHERE kind = 'channel.drain'")[0]?.state).toBe("running");
    });
    await waitFor(
      async () => (await admin.json("GET", "/api/admin/channels")).items.map((c: { id: number }) => c.id),
      (list: number[]) => !list.includes(channelId),
      30_000,
      "the drained channel to be removed",
    );
    expect(await bucketKeys()).toEqual([]);
    // The images are intact on the remaining channel.
    for (const id of ids) expect((await fetch(server.url(`/i/${id}`))).status).toBe(200);
    expect(query<{ n: number }>("SELECT COUNT(*) AS n FROM blob_channels WHERE channel_id = ?", channelId)[0]!.n).toBe(0);
  });
});
