/**
 * Fault tier: a channel peer that answers the headers and a few bytes, then goes silent with the
 * connection open (a hung server mid-body, a NAT mapping that died). The header timeout has
 * passed by then, so only the body's idle deadline (KURA_CHANNEL_TIMEOUT_MS of silence) ends
 * the read. Without it a read, a render or a health check would wait for good. A render whose
 * source stalls holds its slot meanwhile; others wait for one at most process_timeout_ms.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import sharp from "sharp";
import { useAdmin } from "../helpers/fixture";
import { form, makeJpeg, sha256 } from "../helpers/images";
import { metricValue } from "../helpers/metrics";
import { waitFor, waitReplicaState } from "../http/channels.helpers";
import type { FaultProxy } from "./harness";
import { addProxiedChannel, localChannelId, startProxiedS3, timed, type ProxiedS3 } from "./proxied-s3";

const TIMEOUT_MS = 1_500;
/** A stalled read costs one idle deadline (the header deadline never fires), plus a loaded machine. */
const BUDGET_MS = 3 * TIMEOUT_MS + 3_000;

let peer: ProxiedS3;
let proxy: FaultProxy;
let stalledId = 0;
let localId = 0;

beforeAll(async () => {
  peer = await startProxiedS3("stall", "stall");
  proxy = peer.proxy;
});
const { server, admin } = useAdmin({ env: { KURA_CHANNEL_TIMEOUT_MS: String(TIMEOUT_MS) } });
beforeAll(async () => {
  stalledId = await addProxiedChannel(admin, peer, "stalls", 50); // read first while healthy
  localId = await localChannelId(admin);
});
afterAll(() => peer.stop());

/** The whole body, or the error that ended it. */
async function readAll(res: Response): Promise<Buffer | Error> {
  try {
    return Buffer.from(await res.arrayBuffer());
  } catch (err) {
    return err as Error;
  }
}

test("answers that stop mid-body end within the idle deadline: reads and renders fail over, the check fails", async () => {
  const stored = await Promise.all(
    [1, 2].map(async (i) => {
      const bytes = await makeJpeg(700 + i, 400, 30 + i);
      const { id } = await admin.json("POST", "/api/admin/upload", form(bytes, `s${i}.jpg`, { exif_policy: "passthrough" }));
      // On both channels: the local copy is what reads fail over to.
      for (const channel of [stalledId, localId]) await waitReplicaState(admin, id, channel, "done");
      return { id, bytes };
    }),
  );

  // Every object read and every listing from the peer now stops after its first bytes.
  proxy.stallResponses((chunk) => chunk.startsWith("GET "));

  // A small original is read whole before it is answered: it fails over to the local copy.
  const read = await timed(async () => {
    const res = await fetch(server.url(`/i/${stored[0]!.id}`));
    return { status: res.status, body: await readAll(res) };
  });
  expect(read.ms).toBeLessThan(BUDGET_MS);
  expect(read.value.status).toBe(200);
  expect((read.value.body as Buffer).equals(stored[0]!.bytes)).toBe(true);

  // A variant reads the whole source before it renders: it fails over to the local copy.
  const variant = await timed(async () => {
    const res = await fetch(server.url(`/i/${stored[1]!.id}?w=320&format=png`));
    return { status: res.status, body: await readAll(res) };
  });
  expect(variant.ms).toBeLessThan(BUDGET_MS);
  expect(variant.value.status).toBe(200);
  expect(variant.value.body).toBeInstanceOf(Buffer);
  expect((await sharp(variant.value.body as Buffer).metadata()).width).toBe(320);

  // The health check's listing stalls too: it fails with a Chinese reason instead of hanging.
  const check = await timed(() => admin.json("POST", `/api/admin/channels/${stalledId}/check`));
  expect(check.ms).toBeLessThan(BUDGET_MS);
  expect(check.value.healthy).toBe(false);
  expect(check.value.last_error).toContain("未收到数据");

  // Stalled reads let go of their connections (the abort closes them), and nothing failed unhandled.
  await waitFor(
    async () => proxy.openConnections,
    (n) => n <= 4,
    10_000,
    "stalled connections to be closed",
  );
  expect(server.logs).not.toMatch(/level=ERROR msg=请求处理失败/);

  proxy.stallResponses(undefined);
  expect((await admin.json("POST", `/api/admin/channels/${stalledId}/check`)).healthy).toBe(true);
  const again = await fetch(server.url(`/i/${stored[0]!.id}`));
  expect(Buffer.from(await again.arrayBuffer()).equals(stored[0]!.bytes)).toBe(true);
});

test("a render slot held by a stalled source does not make others queue past process_timeout_ms: they get the original", async () => {
  // Long enough for the first request's own render (a 640 px WebP) on two cores busy with the rest of the
  // suite (at 400 ms it once ran out there, and that request got the original), short enough that the
  // second request's wait for the slot ends well before the first's stalled source read (1.5 s) does.
  const PROCESS_TIMEOUT_MS = 800;
  const before = await admin.json("GET", "/api/admin/config");
  await admin.json("PUT", "/api/admin/config", { process_workers: 1, process_timeout_ms: PROCESS_TIMEOUT_MS });
  try {
    const [slow, queued] = await Promise.all(
      [1, 2].map(async (i) => {
        const bytes = await makeJpeg(900 + i, 500, 40 + i);
        const { id } = await admin.json("POST", "/api/admin/upload", form(bytes, `q${i}.jpg`, { exif_policy: "passthrough" }));
        for (const channel of [stalledId, localId]) await waitReplicaState(admin, id, channel, "done");
        return { id, bytes };
      }),
    );
    // Only the first image's reads stall (its storage key holds its sha256); the second reads at once.
    const slowHash = sha256(slow!.bytes);
    proxy.stallResponses((chunk) => chunk.startsWith("GET ") && chunk.includes(slowHash));

    const stalledBefore = proxy.stalledRequests;
    // The only slot: its source read stalls for a whole channel timeout before failing over.
    const first = timed(async () => {
      const res = await fetch(server.url(`/i/${slow!.id}?w=640&format=webp`));
      return { status: res.status, type: res.headers.get("content-type"), body: await readAll(res) };
    });
    const firstEnded = first.then(() => performance.now());
    // It holds the slot once its source read has reached the peer (and stalled there).
    await waitFor(
      async () => proxy.stalledRequests,
      (n) => n > stalledBefore,
      10_000,
      "the first render's source read to stall",
    );
    // A different cold variant meanwhile: it waits for the slot at most process_timeout_ms.
    const second = await timed(async () => {
      const res = await fetch(server.url(`/i/${queued!.id}?w=640&format=webp`));
      return { status: res.status, type: res.headers.get("content-type"), cache: res.headers.get("cache-control"), body: await readAll(res) };
    });
    expect(second.value.status).toBe(200);
    expect(second.value.type).toBe("image/jpeg"); // the original, as when processing fails
    expect(second.value.cache).toBe("no-store");
    expect((second.value.body as Buffer).equals(queued!.bytes)).toBe(true);
    // Done before the slot came free: the request holding it is still waiting out its stalled source.
    // (An order of events, not a time bound a loaded machine could overrun.)
    const secondEnded = performance.now();
    expect(secondEnded).toBeLessThan(await firstEnded);

    // The request holding the slot still gets its variant once the source failed over; on cores busy with
    // the rest of the suite its render may outlive process_timeout_ms itself (CI: the original, once), and is
    // then kept when it ends: the failover worked either way, and the variant is there.
    const done = await first;
    expect(done.value.status).toBe(200);
    if (done.value.type !== "image/webp") {
      expect(server.logs).toMatch(new RegExp(`msg=图片处理失败，返回原图 image=${slow!.id} err="?图片处理超时`));
      await waitFor(
        () => metricValue(server.base, 'kura_variant_late_renders_total{format="webp",result="kept"}'),
        (n) => n >= 1,
        30_000,
        "the late render to be kept",
      );
      const kept = await fetch(server.url(`/i/${slow!.id}?w=640&format=webp`));
      await kept.arrayBuffer();
      expect(kept.headers.get("content-type")).toBe("image/webp");
    }
    expect(server.logs).toContain("等待图片处理超时");
  } finally {
    proxy.stallResponses(undefined);
    await admin.json("PUT", "/api/admin/config", { process_workers: before.process_workers, process_timeout_ms: before.process_timeout_ms });
  }
});
