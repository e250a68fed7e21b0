import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { existsSync, mkdtempSync, renameSync, rmSync, truncateSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { expectError } from "../helpers/client";
import { listFiles } from "../helpers/files";
import { useAdmin } from "../helpers/fixture";
import { form, largeNoiseJpeg, makeJpeg } from "../helpers/images";
import { queryDb, waitFor, waitReplicaState } from "./channels.helpers";

/** Removes an image's object from a local channel directory; returns the removed path. */
function removeObject(dir: string, sha: string): string {
  const file = listFiles(dir).find((f) => f.includes(sha));
  if (!file) throw new Error(`no object for ${sha} under ${dir}`);
  rmSync(join(dir, file));
  return file;
}

describe("several channels: replication, failover reads and redirect mode", () => {
  const dirs: Record<string, string> = {};
  const ids: Record<string, number> = {};

  const createLocal = async (name: string, priority: number, extra: Record<string, unknown> = {}, config: Record<string, string> = {}) => {
    dirs[name] = mkdtempSync(join(tmpdir(), `kura-ch-${name}-`));
    const ch = await admin.json("POST", "/api/admin/channels", { name, driver: "local", config: { path: dirs[name], ...config }, priority, ...extra }, 201);
    ids[name] = ch.id;
    return ch;
  };

  /** Breaks a local channel: its directory becomes a plain file (the original waits beside it). */
  const breakDir = (name: string) => {
    renameSync(dirs[name]!, `${dirs[name]}.away`);
    writeFileSync(dirs[name]!, "not a directory");
  };
  /** Undoes breakDir. */
  const repairDir = (name: string) => {
    rmSync(dirs[name]!);
    renameSync(`${dirs[name]}.away`, dirs[name]!);
  };

  const { server, admin } = useAdmin();
  beforeAll(async () => {
    dirs.local = join(server.dataDir, "storage");
    ids.local = (await admin.json("GET", "/api/admin/channels")).items.find((c: { name: string }) => c.name === "local").id;
    await createLocal("primary", 10);
    await createLocal("spare", 5);
  });
  afterAll(async () => {
    for (const [name, dir] of Object.entries(dirs)) if (name !== "local") rmSync(dir, { recursive: true, force: true });
  });

  test("uploads go to the best channel synchronously and replicate to the rest; detail lists replicas by priority", async () => {
    const { id } = await admin.json("POST", "/api/admin/upload", form(await makeJpeg(40, 40, 1), "r.jpg"));
    await waitReplicaState(admin, id, ids.spare!, "done");
    await waitReplicaState(admin, id, ids.local!, "done");
    const detail = await admin.json("GET", `/api/admin/images/${id}`);
    expect(detail.replicas.map((r: { channel_name: string }) => r.channel_name)).toEqual(["primary", "spare", "local"]);
    expect(detail.replicas.every((r: { state: string }) => r.state === "done")).toBe(true);
  });

  test("reads fail over to the next channel when the best one lost the object; 503 when none has it", async () => {
    const bytes = await makeJpeg(41, 41, 2);
    const { id } = await admin.json("POST", "/api/admin/upload", form(bytes, "f.jpg", { exif_policy: "passthrough" }));
    for (const name of ["spare", "local"]) await waitReplicaState(admin, id, ids[name]!, "done");
    const sha = (await admin.json("GET", `/api/admin/images/${id}`)).sha256;
    // No request has read it yet, so nothing is in memory: this read must fail over.
    removeObject(dirs.primary!, sha);
    const first = await fetch(server.url(`/i/${id}`));
    expect(first.status).toBe(200);
    expect(Buffer.from(await first.arrayBuffer()).equals(bytes)).toBe(true);

    const other = await admin.json("POST", "/api/admin/upload", form(await makeJpeg(43, 43, 5), "g.jpg"));
    for (const name of ["spare", "local"]) await waitReplicaState(admin, other.id, ids[name]!, "done");
    const otherSha = (await admin.json("GET", `/api/admin/images/${other.id}`)).sha256;
    for (const name of ["primary", "spare", "local"]) removeObject(dirs[name]!, otherSha);
    const none = await fetch(server.url(`/i/${other.id}`));
    expect(none.status).toBe(503);
    expect(await none.text()).toMatch(/[\u4e00-\u9fff]/);
  });

  test("a failing channel gets failed replicas, which are retried when it is healthy again", async () => {
    await createLocal("flaky", 1);
    const dir = dirs.flaky!;
    // Break it after creation: its directory becomes a plain file.
    breakDir("flaky");
    const { id } = await admin.json("POST", "/api/admin/upload", form(await makeJpeg(42, 42, 3), "x.jpg"));
    const failed = await waitReplicaState(admin, id, ids.flaky!, "failed");
    expect(failed!.last_error).toMatch(/[\u4e00-\u9fff]/);
    const checked = await admin.json("POST", `/api/admin/channels/${ids.flaky}/check`);
    expect(checked.healthy).toBe(false);
    expect(checked.last_error).not.toBe("");
    const attempts = () =>
      queryDb<{ id: string | null; attempts: number }>(
        server,
        "SELECT i.id, bc.attempts FROM blob_channels bc LEFT JOIN images i ON i.blob_id = bc.blob_id WHERE bc.channel_id = ?",
        ids.flaky!,
      );
    expect(attempts().find((a) => a.id === id)?.attempts).toBeGreaterThanOrEqual(1);
    // The images of the earlier tests were backfilled to the new channel by their own jobs, which
    // may still be on their way (the backfill job enqueues them later): wait for their attempts.
    await waitFor(
      async () => attempts(),
      (rows) => rows.every((a) => a.attempts >= 1),
      15_000,
      "every replica on flaky attempted",
    );
    // Repair and check: the failed replica is written without waiting out its back-off.
    repairDir("flaky");
    const healthy = await admin.json("POST", `/api/admin/channels/${ids.flaky}/check`);
    expect(healthy.healthy).toBe(true);
    await waitReplicaState(admin, id, ids.flaky!, "done", 10_000);
    const sha = (await admin.json("GET", `/api/admin/images/${id}`)).sha256;
    expect(listFiles(dir).some((f) => f.includes(sha))).toBe(true);
  });

  test("an encrypted channel stores only ciphertext and still serves reads", async () => {
    const vault = await createLocal("vault", 30, { encrypted: true });
    expect(vault.encrypted).toBe(true);
    const bytes = await makeJpeg(50, 50, 9);
    const { id } = await admin.json("POST", "/api/admin/upload", form(bytes, "secret.jpg", { exif_policy: "passthrough" }));
    const sha = (await admin.json("GET", `/api/admin/images/${id}`)).sha256;
    // The vault may get its copy by replication after the upload answered: read it once it is done,
    // not while its temp file is still being written.
    await waitReplicaState(admin, id, ids.vault!, "done");
    const stored = listFiles(dirs.vault!);
    expect(stored.length).toBeGreaterThan(0);
    expect(stored.some((f) => f.includes(sha) || f.startsWith("img/"))).toBe(false);
    for (const f of stored)
      expect(
        Buffer.from(await Bun.file(join(dirs.vault!, f)).bytes())
          .subarray(0, 8)
          .toString("latin1"),
      ).toBe("RCLONE\0\0");
    // Only the vault keeps a copy: every other channel loses it.
    for (const name of ["primary", "spare", "local"]) {
      await waitReplicaState(admin, id, ids[name]!, "done");
      removeObject(dirs[name]!, sha);
    }
    const res = await fetch(server.url(`/i/${id}`));
    expect(res.status).toBe(200);
    expect(Buffer.from(await res.arrayBuffer()).equals(bytes)).toBe(true);
  });

  test("redirect mode: originals 302 to a direct-link channel, variants are served by us", async () => {
    await expectError(
      await admin.request("POST", "/api/admin/channels", {
        name: "enc-direct",
        driver: "local",
        config: { path: mkdtempSync(join(tmpdir(), "kura-enc-")) },
        encrypted: true,
        allow_direct_link: true,
      }),
      400,
    );
    await createLocal("cdn", 20, { allow_direct_link: true }, { public_base_url: "https://cdn.example.com/kura/" });
    const { id } = await admin.json("POST", "/api/admin/upload", form(await makeJpeg(60, 60, 4), "d.jpg"));
    await waitReplicaState(admin, id, ids.cdn!, "done");
    const detail = await admin.json("GET", `/api/admin/images/${id}`);
    const key = listFiles(dirs.cdn!).find((f) => f.startsWith(`img/`) && f.includes(detail.sha256))!;
    // Proxy mode (default) serves bytes.
    expect((await fetch(server.url(`/i/${id}`), { redirect: "manual" })).status).toBe(200);
    await admin.json("PUT", "/api/admin/config", { access_mode: "redirect" });
    const res = await fetch(server.url(`/i/${id}`), { redirect: "manual" });
    expect(res.status).toBe(302);
    expect(res.headers.get("location")).toBe(`https://cdn.example.com/kura/${key}`);
    expect(res.headers.get("cache-control")).toBe("no-store");
    expect(res.headers.get("etag")).toBeNull();
    const variant = await fetch(server.url(`/i/${id}?w=320`), { redirect: "manual", headers: { accept: "image/webp" } });
    expect(variant.status).toBe(200);
    expect(variant.headers.get("content-type")).toBe("image/webp");
    // The admin thumb endpoint follows the same pipeline (spec 4.4): its original redirects too.
    const thumb = await admin.request("GET", `/api/admin/images/${id}/thumb`);
    expect(thumb.status).toBe(302);
    expect(thumb.headers.get("location")).toBe(`https://cdn.example.com/kura/${key}`);
    await admin.json("PUT", "/api/admin/config", { access_mode: "proxy" });
  });

  test("redirect mode links only from a healthy channel that allows direct links and has a public address", async () => {
    /** Breaks (or repairs) a local channel, and has its check record it. */
    const setBroken = async (name: string, broken: boolean) => {
      (broken ? breakDir : repairDir)(name);
      expect((await admin.json("POST", `/api/admin/channels/${ids[name]}/check`)).healthy).toBe(!broken);
    };
    // Ahead of the linkable ones: one allows direct links but has no public address, one has an address but does not allow them.
    await createLocal("nobase", 60, { allow_direct_link: true });
    await createLocal("nodirect", 50, {}, { public_base_url: "https://nodirect.example.com/" });
    await createLocal("cdn2", 40, { allow_direct_link: true }, { public_base_url: "https://cdn2.example.com/a//" });
    const bytes = await makeJpeg(61, 61, 11);
    const { id } = await admin.json("POST", "/api/admin/upload", form(bytes, "l.jpg", { exif_policy: "passthrough" }));
    for (const name of ["nobase", "nodirect", "cdn2", "cdn"]) await waitReplicaState(admin, id, ids[name]!, "done");
    const { sha256 } = await admin.json("GET", `/api/admin/images/${id}`);
    const key = listFiles(dirs.cdn2!).find((f) => f.startsWith("img/") && f.includes(sha256))!;
    const location = async () => {
      const res = await fetch(server.url(`/i/${id}`), { redirect: "manual" });
      if (res.status === 302) return res.headers.get("location");
      expect(res.status).toBe(200);
      expect(Buffer.from(await res.arrayBuffer()).equals(bytes)).toBe(true);
      return "served";
    };
    await admin.json("PUT", "/api/admin/config", { access_mode: "redirect" });
    try {
      // Trailing slashes of the address collapse into the one before the key.
      expect(await location()).toBe(`https://cdn2.example.com/a/${key}`);
      await setBroken("cdn2", true);
      expect(await location()).toBe(`https://cdn.example.com/kura/${key}`);
      await setBroken("cdn", true);
      // No healthy channel can link: the bytes are served by us (from nobase, the best copy).
      expect(await location()).toBe("served");
    } finally {
      await admin.json("PUT", "/api/admin/config", { access_mode: "proxy" });
      for (const name of ["cdn2", "cdn"]) if (existsSync(`${dirs[name]}.away`)) await setBroken(name, false);
    }
  });
});

describe("an original whose best copy has the wrong size", () => {
  const { server, admin } = useAdmin();
  const dir = mkdtempSync(join(tmpdir(), "kura-ch-short-"));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  test("a short local file is never sent as the image (sendfile checks nothing): the next channel's bytes are", async () => {
    const best = await admin.json("POST", "/api/admin/channels", { name: "best", driver: "local", config: { path: dir }, priority: 10 }, 201);
    const localId = (await admin.json("GET", "/api/admin/channels")).items.find((c: { name: string }) => c.name === "local").id;
    for (const [bytes, what] of [
      [await largeNoiseJpeg(77), "streamed (over 2 MiB)"],
      [await makeJpeg(300, 200, 12), "read whole and kept in memory"],
    ] as const) {
      const { id } = await admin.json("POST", "/api/admin/upload", form(bytes, "short.jpg", { exif_policy: "passthrough" }));
      await waitReplicaState(admin, id, best.id, "done");
      await waitReplicaState(admin, id, localId, "done");
      const { sha256 } = await admin.json("GET", `/api/admin/images/${id}`);
      const file = join(dir, listFiles(dir).find((f) => f.includes(sha256))!);
      // The stored copy loses its tail: what it still has is the image's own first bytes.
      truncateSync(file, bytes.length - 1000);
      const res = await fetch(server.url(`/i/${id}`));
      expect(`${what}: ${res.status} ${res.headers.get("content-length")}`).toBe(`${what}: 200 ${bytes.length}`);
      expect(Buffer.from(await res.arrayBuffer()).equals(bytes)).toBe(true);
    }
  }, 60_000);
});
