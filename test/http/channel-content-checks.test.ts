/**
 * Bytes a channel answers with are checked before they are copied, cached or served: their
 * length against the size the driver reported, their content against the blob's SHA-256
 * (every storage key embeds it). A WebDAV peer (fakes/webdav.ts) flips bytes at the same
 * length, appends bytes to a chunked answer without Content-Length (only PROPFIND's size
 * bounds it), or never ends. Also: a copy still in flight when its channel is deleted with
 * purge=false ends quietly.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, test } from "bun:test";
import { useAdmin } from "../helpers/fixture";
import { form, largeNoiseJpeg, makeJpeg, sha256 } from "../helpers/images";
import { FakeDav } from "../channels/fakes/webdav";
import { replicaOn, waitFor, waitReplicaState } from "./channels.helpers";

describe("content checks on reads from a misbehaving WebDAV peer", () => {
  const dav = new FakeDav();
  const { server, admin } = useAdmin();
  let davId: number;
  let localId: number;
  let seed = 100;
  afterAll(() => dav.stop());
  beforeAll(async () => {
    const config = { url: dav.url, vendor: "other", bearer_token: "dav-token" };
    davId = (await admin.json("POST", "/api/admin/channels", { name: "dav", driver: "webdav", config, priority: 10 }, 201)).id;
    localId = (await admin.json("GET", "/api/admin/channels")).items.find((c: { name: string }) => c.name === "local").id;
  });
  beforeEach(() => {
    dav.getMode = "ok";
  });

  /** Uploads a new image (synchronously to dav, the best channel); with `both`, waits for the local copy too. */
  async function upload(both: boolean, bytes?: Buffer) {
    const body = bytes ?? (await makeJpeg(40, 30, ++seed));
    const { id } = await admin.json("POST", "/api/admin/upload", form(body, "c.jpg", { exif_policy: "passthrough" }));
    await waitReplicaState(admin, id, davId, "done");
    if (both) await waitReplicaState(admin, id, localId, "done");
    return { id: id as string, bytes: body };
  }

  const get = (id: string) => fetch(server.url(`/i/${id}`));

  async function expectServed(id: string, bytes: Buffer) {
    const res = await get(id);
    expect(res.status).toBe(200);
    const body = Buffer.from(await res.arrayBuffer());
    expect(body.length).toBe(bytes.length);
    expect(sha256(body)).toBe(sha256(bytes));
  }

  async function expect503(id: string) {
    const res = await get(id);
    expect(res.status).toBe(503);
    expect(await res.text()).toMatch(/没有可读取/);
  }

  test("replication refuses bytes that do not match the SHA-256; delivery answers 503 and caches nothing", async () => {
    dav.getMode = "flip"; // before the job copies dav's answer to local
    const { id, bytes } = await upload(false);
    const replica = await waitReplicaState(admin, id, localId, "failed");
    expect(replica!.last_error).toMatch(/SHA-256 不符/);
    // The only done copy answers wrong bytes: nothing to serve, and nothing may be kept.
    await expect503(id);
    await expect503(id);
    // The peer recovers: the right bytes, never the wrong ones from memory.
    dav.getMode = "ok";
    await expectServed(id, bytes);
    // The job's retry (its backoff) now copies the right bytes.
    await waitReplicaState(admin, id, localId, "done", 30_000);
    expect(server.logs).not.toMatch(/FOREIGN KEY/);
  }, 60_000);

  test("a done replica answering wrong bytes is failed over (right bytes served and cached) and repaired", async () => {
    const { id, bytes } = await upload(true);
    dav.getMode = "flip";
    const gets = dav.imageGets;
    await expectServed(id, bytes);
    expect(dav.imageGets).toBe(gets + 1); // dav was asked first and refused
    await expectServed(id, bytes);
    expect(dav.imageGets).toBe(gets + 1); // from memory: the verified bytes
    await server.waitForLog(/副本数据与 SHA-256 不符/);
    // Read repair: marked failed, copied again from local (the peer stores what it is sent).
    await waitFor(
      () => replicaOn(admin, id, davId),
      (r) => r?.state === "done" && r.last_error === "",
      15_000,
      "dav's replica copied again",
    );
    const stored = [...dav.files.entries()].find(([k]) => k.includes(sha256(bytes)));
    expect(sha256(stored![1])).toBe(sha256(bytes));
  });

  test("a chunked answer longer than PROPFIND's size is neither copied, served nor cached", async () => {
    dav.getMode = "append";
    const { id, bytes } = await upload(false);
    const replica = await waitReplicaState(admin, id, localId, "failed");
    expect(replica!.last_error).toMatch(/更长/);
    await expect503(id);
    // A chunked answer of the right length is fine.
    dav.getMode = "chunked";
    await expectServed(id, bytes);
  });

  test("the same with another copy: the right bytes from local", async () => {
    const { id, bytes } = await upload(true);
    dav.getMode = "append";
    await expectServed(id, bytes);
    await expectServed(id, bytes);
  });

  test("an endless chunked answer is cut at the object's size: 503 at once, the peer stops sending", async () => {
    dav.getMode = "endless";
    const { id } = await upload(false);
    const before = dav.sentJunk;
    await expect503(id);
    await Bun.sleep(300);
    // The copy job and the read each stop one chunk past the size; the peer's queue is bounded.
    expect(dav.sentJunk - before).toBeLessThan(16 * 1024 * 1024);
  });

  test("a streamed original (over 2 MiB) with wrong bytes is cut before its end, then served from local", async () => {
    await admin.json("PUT", "/api/admin/config", { max_upload_mb: 20 });
    const { id, bytes } = await upload(true, await largeNoiseJpeg(++seed));
    expect(bytes.length).toBeGreaterThan(2 * 1024 * 1024);
    dav.getMode = "flip";
    // The copy back to dav (read repair) is held, so dav's replica stays failed while the next
    // read is made: repaired, it would be read (and cut) again, since dav still flips.
    dav.holdPuts = true;
    try {
      const res = await get(id);
      expect(res.status).toBe(200);
      // The answer started before the end was checked, so it is aborted: never a complete body.
      const got = await res.arrayBuffer().then(
        (b) => b.byteLength,
        () => -1,
      );
      expect(got).not.toBe(bytes.length);
      // The wrong copy is marked failed (local holds a good one), so the next read goes to local.
      await waitFor(
        () => replicaOn(admin, id, davId),
        (r) => r?.state !== "done",
        10_000,
        "dav's replica marked failed",
      );
      await expectServed(id, bytes);
    } finally {
      dav.releasePuts();
    }
  }, 60_000);
});

describe("a copy in flight when its channel is deleted with purge=false", () => {
  const dav = new FakeDav();
  const { server, admin } = useAdmin();
  afterAll(() => dav.stop());

  test("ends quietly: no raw SQL error, no retry", async () => {
    const config = { url: dav.url, vendor: "other", bearer_token: "dav-token" };
    const ch = await admin.json("POST", "/api/admin/channels", { name: "held", driver: "webdav", config, priority: -10 }, 201);
    dav.holdPuts = true;
    const { id } = await admin.json("POST", "/api/admin/upload", form(await makeJpeg(30, 20, 7), "h.jpg"));
    await waitFor(
      async () => dav.server.pendingRequests,
      (n) => n > 0,
      10_000,
      "the replication PUT to reach the peer",
    );
    const del = await admin.request("DELETE", `/api/admin/channels/${ch.id}?purge=false`);
    expect(del.status).toBe(204);
    dav.releasePuts();
    await server.waitForLog(/存储渠道已删除，复制任务结束/, 10_000);
    await Bun.sleep(300);
    expect(server.logs).not.toMatch(/FOREIGN KEY/);
    expect(server.logs).not.toMatch(/任务失败.*blob\.replicate/);
    expect((await admin.json("GET", `/api/admin/images/${id}`)).replicas.map((r: { channel_id: number }) => r.channel_id)).not.toContain(ch.id);
  });
});
