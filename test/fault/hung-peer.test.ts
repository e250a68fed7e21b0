/**
 * Fault tier: a channel peer that accepts TCP connections and never answers (a hung S3 server,
 * a black-holing firewall). Kura must time out (KURA_CHANNEL_TIMEOUT_MS, here 1.5 s), fail
 * over for reads and uploads, mark the channel unhealthy, and not pile up sockets or jobs; when
 * the peer answers again, the missing replicas are written.
 */
import { Database } from "bun:sqlite";
import { afterAll, beforeAll, expect, test } from "bun:test";
import { join } from "node:path";
import { useAdmin } from "../helpers/fixture";
import { form, makeJpeg } from "../helpers/images";
import { waitFor, waitReplicaState } from "../http/channels.helpers";
import type { FaultProxy } from "./harness";
import { addProxiedChannel, localChannelId, startProxiedS3, timed, type ProxiedS3 } from "./proxied-s3";

const TIMEOUT_MS = 1_500;
/** A failover may cost a timeout plus one retry of a failed connection, and the machine is loaded. */
const FAILOVER_BUDGET_MS = 4 * TIMEOUT_MS + 3_000;

let peer: ProxiedS3;
let proxy: FaultProxy;
let hungId = 0;
let localId = 0;

beforeAll(async () => {
  peer = await startProxiedS3("hung", "hung");
  proxy = peer.proxy;
});
const { server, admin } = useAdmin({ env: { KURA_CHANNEL_TIMEOUT_MS: String(TIMEOUT_MS) } });
beforeAll(async () => {
  hungId = await addProxiedChannel(admin, peer, "hung", 50); // read first while healthy
  localId = await localChannelId(admin);
});
afterAll(() => peer.stop());

test("a peer that never answers: timeouts, failover for reads and uploads, no pile-up, recovery", async () => {
  // Written to both while the peer is fine; not read yet, so no copy is in memory.
  const stored = await Promise.all(
    [1, 2, 3].map(async (i) => {
      const bytes = await makeJpeg(50 + i, 40, 20 + i);
      const { id } = await admin.json("POST", "/api/admin/upload", form(bytes, `h${i}.jpg`, { exif_policy: "passthrough" }));
      await waitReplicaState(admin, id, localId, "done");
      return { id, bytes };
    }),
  );

  proxy.mode = "blackhole";

  // Reads fail over to the local channel after the timeout, not after 30 s.
  const read = await timed(() => fetch(server.url(`/i/${stored[0]!.id}`)));
  expect(read.value.status).toBe(200);
  expect(Buffer.from(await read.value.arrayBuffer()).equals(stored[0]!.bytes)).toBe(true);
  expect(read.ms).toBeLessThan(FAILOVER_BUDGET_MS);

  // Uploads fail over to the next channel, and a burst of work does not pile up sockets or jobs.
  const burst = await timed(() =>
    Promise.all([
      ...[4, 5, 6, 7].map(async (i) => admin.request("POST", "/api/admin/upload", form(await makeJpeg(50 + i, 40, 20 + i), `h${i}.jpg`))),
      ...stored.slice(1).map((s) => fetch(server.url(`/i/${s.id}`))),
    ]),
  );
  for (const res of burst.value) expect(res.status).toBe(200);
  expect(burst.ms).toBeLessThan(2 * FAILOVER_BUDGET_MS);

  // The health check times out too and takes the channel out of the write path.
  const check = await timed(() => admin.json("POST", `/api/admin/channels/${hungId}/check`));
  expect(check.value.healthy).toBe(false);
  expect(check.value.last_error).toMatch(/[\u4e00-\u9fff]/);
  expect(check.ms).toBeLessThan(FAILOVER_BUDGET_MS);
  const next = await makeJpeg(70, 40, 40);
  const fast = await timed(() => admin.request("POST", "/api/admin/upload", form(next, "h8.jpg")));
  expect(fast.value.status).toBe(200);
  expect(fast.ms).toBeLessThan(TIMEOUT_MS); // an unhealthy channel is not even tried

  // Timed-out attempts let go of their connections, and replication jobs stay one per replica.
  await waitFor(
    async () => proxy.openConnections,
    (n) => n <= 4,
    10_000,
    "timed-out connections to be closed",
  );
  const db = new Database(join(server.dataDir, "kura.db"), { readonly: true });
  try {
    const jobs = db
      .query<{ n: number; running: number }, []>(
        "SELECT COUNT(*) AS n, SUM(state = 'running') AS running FROM jobs WHERE kind = 'blob.replicate' AND state != 'completed'",
      )
      .get()!;
    const missing = db.query<{ n: number }, [number]>("SELECT COUNT(*) AS n FROM blob_channels WHERE channel_id = ? AND state != 'done'").get(hungId)!.n;
    expect(jobs.n).toBeLessThanOrEqual(missing);
    expect(jobs.running ?? 0).toBeLessThanOrEqual(4); // the replication concurrency
  } finally {
    db.close();
  }
  expect(server.logs).not.toMatch(/level=ERROR msg=请求处理失败/);

  // The peer answers again: a check makes it healthy and every image gets its replica.
  proxy.mode = "pass";
  expect((await admin.json("POST", `/api/admin/channels/${hungId}/check`)).healthy).toBe(true);
  const images = (await admin.json("GET", "/api/admin/images?limit=100")).items as { id: string }[];
  for (const img of images) await waitReplicaState(admin, img.id, hungId, "done", 20_000);
});
