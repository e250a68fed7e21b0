// A delivery thread's rules, in this process and deterministic (the black-box side is
// test/http/delivery-threads.test.ts): a DeliveryFront over a real data dir, with a stand-in for
// the main thread's private listener that records what the front hands over.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { randomBytes } from "node:crypto";
import { join } from "node:path";
import type { AppContext } from "../../src/context";
import { HANDOVER_COUNTED_HEADER, HANDOVER_PEER_HEADER, HANDOVER_SECRET_HEADER, type FrontInit, type FrontStats } from "../../src/http/threads/protocol";
import { originalEtag } from "../../src/delivery/etag";
import { DeliveryFront } from "../../src/http/threads/front";
import { runUpload } from "../../src/images/upload/service";
import { makeJpeg } from "../helpers/images";
import { serviceContext } from "../services/harness";

describe("a delivery thread", () => {
  let app: AppContext;
  let dispose: () => void;
  let front: DeliveryFront;
  let mainStandIn: ReturnType<typeof Bun.serve>;
  let base: string;
  let id: string;
  let jpeg: Buffer;
  const handed: { path: string; peer: string | null; counted: boolean; secret: string | null }[] = [];
  const reports: FrontStats[] = [];
  const generation = new Int32Array(new SharedArrayBuffer(4));
  const secret = randomBytes(32).toString("hex");

  beforeAll(async () => {
    ({ app, dispose } = await serviceContext());
    jpeg = await makeJpeg(64, 48, 5);
    const path = join(app.paths.tmp, "front-test");
    await Bun.write(path, jpeg);
    const outcome = await runUpload(app, app.uploadGate, {
      userId: app.users.byName("admin")!.id,
      tokenId: null,
      receive: async () => ({ file: { path, size: jpeg.length, fileName: "a.jpg" }, options: {} }),
    });
    id = outcome.id;
    const socket = `\0kura-front-test-${process.pid}`;
    // The main thread's side: answers like Kura would for the original (same ETag), and records the handover headers.
    const etag = originalEtag(app.images.view(id)!.sha256);
    mainStandIn = Bun.serve({
      unix: socket,
      fetch: (req) => {
        handed.push({
          path: new URL(req.url).pathname,
          peer: req.headers.get(HANDOVER_PEER_HEADER),
          counted: req.headers.has(HANDOVER_COUNTED_HEADER),
          secret: req.headers.get(HANDOVER_SECRET_HEADER),
        });
        return new Response(new Uint8Array(jpeg), { headers: { etag, "content-type": "image/jpeg" } });
      },
    });
    const init: FrontInit = {
      type: "init",
      hostname: "127.0.0.1",
      port: 0,
      socket,
      secret,
      dbPath: app.db.filename,
      maxRequestBodySize: 1024 * 1024,
      hotBytesBudget: 16 * 1024 * 1024,
      settings: { ...app.settings.get() },
      referers: [],
      generation: generation.buffer as SharedArrayBuffer,
      applied: 0,
    };
    front = new DeliveryFront(init, (s) => reports.push(s));
    base = front.listen(init);
  });
  afterAll(async () => {
    await front.stop();
    await mainStandIn.stop(true);
    dispose();
  });

  const get = async (path: string) => {
    const res = await fetch(`${base}${path}`);
    return { status: res.status, bytes: Buffer.from(await res.arrayBuffer()) };
  };

  test("the first request for an image is handed over with the access counted here; its answer fills the thread's memory", async () => {
    handed.length = 0;
    expect((await get(`/i/${id}`)).bytes.equals(jpeg)).toBe(true);
    expect(handed).toEqual([{ path: `/i/${id}`, peer: "127.0.0.1", counted: true, secret }]);
    const again = await get(`/i/${id}`);
    expect(again.status).toBe(200);
    expect(again.bytes.equals(jpeg)).toBe(true);
    expect(handed.length).toBe(1); // answered from memory
  });

  test("other paths are handed over, not counted", async () => {
    handed.length = 0;
    await get("/api/admin/me");
    expect(handed).toEqual([{ path: "/api/admin/me", peer: "127.0.0.1", counted: false, secret }]);
  });

  test("while the main thread's generation is ahead of what the thread applied, every /i/ request is handed over", async () => {
    handed.length = 0;
    Atomics.add(generation, 0, 1); // a change was announced; its message has not arrived
    await get(`/i/${id}`);
    await get(`/i/${id}`);
    expect(handed.map((h) => [h.path, h.counted])).toEqual([
      [`/i/${id}`, false],
      [`/i/${id}`, false],
    ]);
    // The message arrives: the image was deleted. From memory again, and the row is gone.
    app.db.run("UPDATE images SET expire_at = '2000-01-01 00:00:00' WHERE id = ?", [id]);
    front.apply({ type: "invalidate", generation: Atomics.load(generation, 0), images: [id], aliases: [], blobs: [] });
    handed.length = 0;
    expect((await get(`/i/${id}`)).status).toBe(404);
    expect(handed.length).toBe(0);
  });

  test("its access counts and answers reach the main thread in reports", async () => {
    front.flushReports();
    const access = reports.flatMap((r) => r.access).filter(([image]) => image === id);
    // Counted: the handed-over first GET and the GET from memory (the 404s of an expired row count nothing).
    expect(access.reduce((n, [, count]) => n + count, 0)).toBe(2);
    const answers = reports.flatMap((r) => r.answers).map(([method, status, durations]) => [method, status, durations.length]);
    expect(answers).toContainEqual(["GET", 200, 1]);
    expect(answers).toContainEqual(["GET", 404, 1]);
  });
});
