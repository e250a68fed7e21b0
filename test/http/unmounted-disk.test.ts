/**
 * A local channel whose directory is gone for a while (a disk that is not mounted) is a channel
 * fault, not a channel without objects. Read repair marked the last copy of every image read in
 * that window failed, and nothing could copy it back (no other copy to copy from): the images
 * answered 503 for good with their bytes intact on the disk, and the only-copy guard then let the
 * channel be deleted with them. A drain of such a channel listed nothing and removed the channel
 * as "emptied", its objects left behind and no drain_failed.
 */
import { Database } from "bun:sqlite";
import { describe, expect, test } from "bun:test";
import { existsSync, mkdtempSync, renameSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { listFiles } from "../helpers/files";
import { useAdmin } from "../helpers/fixture";
import { form, makeJpeg } from "../helpers/images";
import { queryDb, replicaOn, waitAllReplicasDone, waitFor, waitReplicaState } from "./channels.helpers";

/** Sets replica rows in the server's database file, as an install upgraded from a version with the old read repair has them. */
function markReplicasFailed(server: { dataDir: string }, imageId: string, channelIds: number[]) {
  const db = new Database(join(server.dataDir, "kura.db"));
  try {
    db.run("PRAGMA busy_timeout = 5000");
    const mark = db.query(
      "UPDATE blob_channels SET state = 'failed', last_error = '没有可读取该图片的健康存储渠道' WHERE channel_id = ? AND blob_id = (SELECT blob_id FROM images WHERE id = ?)",
    );
    for (const channel of channelIds) mark.run(channel, imageId);
  } finally {
    db.close();
  }
}

describe("the only copy on a disk that went away", () => {
  const { server, admin } = useAdmin();
  const builtIn = async () => (await admin.json("GET", "/api/admin/channels")).items.find((c: { name: string }) => c.name === "local").id as number;
  const storage = () => join(server.dataDir, "storage");

  test("a read that finds the last copy's object missing marks it failed; put back, it is served at once and recorded done again", async () => {
    const bytes = await makeJpeg(48, 32, 4);
    const { id } = await admin.json("POST", "/api/admin/upload", form(bytes, "lost.jpg", { exif_policy: "passthrough" }));
    const channel = await builtIn();
    const sha = (await admin.json("GET", `/api/admin/images/${id}`)).sha256 as string;
    const file = join(storage(), listFiles(storage()).find((f) => f.includes(sha))!);
    renameSync(file, `${file}.aside`);
    try {
      const gone = await fetch(server.url(`/i/${id}`));
      expect(gone.status).toBe(503);
      await gone.arrayBuffer();
      // Failed, so a re-upload of these bytes would write them again rather than reference nothing.
      expect((await replicaOn(admin, id, channel))?.state).toBe("failed");
    } finally {
      renameSync(`${file}.aside`, file);
    }
    // Read from the unconfirmed copy (readOrder's last resort) before any job has looked again.
    const back = await fetch(server.url(`/i/${id}`));
    expect(back.status).toBe(200);
    expect(Buffer.from(await back.arrayBuffer()).equals(bytes)).toBe(true);
    // The queued copy retries with back-off; a check requeues it now, and it finds the object whole.
    await admin.json("POST", `/api/admin/channels/${channel}/check`);
    await waitReplicaState(admin, id, channel, "done", 10_000);
  });

  test("a read while the directory is gone keeps the copy recorded; mounted again, the image is served", async () => {
    const bytes = await makeJpeg(48, 32, 1);
    const { id } = await admin.json("POST", "/api/admin/upload", form(bytes, "solo.jpg", { exif_policy: "passthrough" }));
    const channel = await builtIn();
    renameSync(storage(), `${storage()}.unmounted`);
    try {
      const gone = await fetch(server.url(`/i/${id}`));
      expect(gone.status).toBe(503);
      await gone.arrayBuffer();
      expect((await replicaOn(admin, id, channel))?.state).toBe("done");
    } finally {
      renameSync(`${storage()}.unmounted`, storage());
    }
    expect((await admin.json("POST", `/api/admin/channels/${channel}/check`)).healthy).toBe(true);
    const back = await fetch(server.url(`/i/${id}`));
    expect(back.status).toBe(200);
    expect(Buffer.from(await back.arrayBuffer()).equals(bytes)).toBe(true);
  });

  test("a copy already recorded failed (by an earlier version's read repair) is found intact and recorded done at the next check", async () => {
    const bytes = await makeJpeg(48, 32, 2);
    const { id } = await admin.json("POST", "/api/admin/upload", form(bytes, "stuck.jpg", { exif_policy: "passthrough" }));
    const channel = await builtIn();
    markReplicasFailed(server, id, [channel]);
    await admin.json("POST", `/api/admin/channels/${channel}/check`);
    const replica = await waitReplicaState(admin, id, channel, "done", 10_000);
    expect(replica?.last_error).toBe("");
    const res = await fetch(server.url(`/i/${id}`));
    expect(res.status).toBe(200);
    expect(Buffer.from(await res.arrayBuffer()).equals(bytes)).toBe(true);
    await server.waitForLog(/渠道上的对象完好，副本已恢复/);
  });

  test("a copy not recorded done is read only whole (checked against the SHA-256), never for a range", async () => {
    const bytes = await makeJpeg(48, 32, 7);
    const { id } = await admin.json("POST", "/api/admin/upload", form(bytes, "ranged.jpg", { exif_policy: "passthrough" }));
    const channel = await builtIn();
    markReplicasFailed(server, id, [channel]);
    await Bun.sleep(2100); // the delivery memo of done copies lives 2 s
    // A range cannot be checked: a copy found corrupt would be served as the image, for a year.
    const ranged = await fetch(server.url(`/i/${id}`), { headers: { range: "bytes=0-99" } });
    expect(ranged.status).toBe(503);
    await ranged.arrayBuffer();
    const whole = await fetch(server.url(`/i/${id}`));
    expect(whole.status).toBe(200);
    expect(Buffer.from(await whole.arrayBuffer()).equals(bytes)).toBe(true);
  });

  test("a copy to a new channel that failed while the only copy's disk was away is made once that channel is checked healthy", async () => {
    const { id } = await admin.json("POST", "/api/admin/upload", form(await makeJpeg(48, 32, 5), "later.jpg"));
    const channel = await builtIn();
    const parent = mkdtempSync(join(tmpdir(), "kura-second-"));
    renameSync(storage(), `${storage()}.unmounted`);
    let second = 0;
    try {
      second = (await admin.json("POST", "/api/admin/channels", { name: "second", driver: "local", config: { path: join(parent, "d") }, priority: 1 }, 201)).id;
      // Three attempts spent: the next one backs off at least 4 s (2^2 s, jittered into [d/2, d]).
      await waitFor(
        () => replicaOn(admin, id, second),
        (r) => r?.state === "failed" && r.attempts >= 3,
        20_000,
        "three failed attempts",
      );
    } finally {
      renameSync(`${storage()}.unmounted`, storage());
    }
    const checked = Date.now();
    expect((await admin.json("POST", `/api/admin/channels/${channel}/check`)).healthy).toBe(true);
    await waitReplicaState(admin, id, second, "done", 10_000);
    // Now, not at the failed job's own next retry.
    expect(Date.now() - checked).toBeLessThan(2_500);
    await admin.request("DELETE", `/api/admin/channels/${second}?purge=false`);
    rmSync(parent, { recursive: true, force: true });
  }, 60_000);

  test("a channel with a copy recorded failed and no completed copy elsewhere is the only copy: 409", async () => {
    const parent = mkdtempSync(join(tmpdir(), "kura-guard-"));
    try {
      const ch = await admin.json("POST", "/api/admin/channels", { name: "guarded", driver: "local", config: { path: join(parent, "d") }, priority: 5 }, 201);
      const { id } = await admin.json("POST", "/api/admin/upload", form(await makeJpeg(48, 32, 6), "guard.jpg"));
      await waitAllReplicasDone(admin, id, 2);
      markReplicasFailed(server, id, [ch.id, await builtIn()]);
      const refused = await admin.request("DELETE", `/api/admin/channels/${ch.id}?purge=true`);
      expect(refused.status).toBe(409);
      expect(listFiles(join(parent, "d")).some((f) => f.startsWith("img/"))).toBe(true);
      await admin.request("DELETE", `/api/admin/images/${id}`);
      await admin.request("DELETE", `/api/admin/channels/${ch.id}?purge=false`);
    } finally {
      rmSync(parent, { recursive: true, force: true });
    }
  });

  test("deleting a channel whose directory is gone: drain_failed, the channel and its objects kept; mounted again, the drain finishes", async () => {
    const parent = mkdtempSync(join(tmpdir(), "kura-unmounted-"));
    const dir = join(parent, "disk");
    try {
      const ch = await admin.json("POST", "/api/admin/channels", { name: "usb", driver: "local", config: { path: dir }, priority: 5 }, 201);
      const { id } = await admin.json("POST", "/api/admin/upload", form(await makeJpeg(48, 32, 3), "two.jpg"));
      await waitAllReplicasDone(admin, id, 2);
      const held = listFiles(dir);
      expect(held.length).toBeGreaterThan(0);

      renameSync(dir, `${dir}.unmounted`);
      expect((await admin.request("DELETE", `/api/admin/channels/${ch.id}?purge=true`)).status).toBe(202);
      await server.waitForLog(/msg=告警已触发 kind=drain_failed target=usb/, 20_000);
      expect(server.logs).not.toMatch(/存储渠道已清空并移除 channel=usb/);
      expect(queryDb(server, "SELECT id FROM channels WHERE id = ? AND deleting = 1", ch.id).length).toBe(1);
      expect(listFiles(`${dir}.unmounted`)).toEqual(held);

      renameSync(`${dir}.unmounted`, dir);
      await waitFor(
        async () => queryDb(server, "SELECT id FROM channels WHERE id = ?", ch.id).length,
        (n) => n === 0,
        30_000,
        "the drain to finish",
      );
      expect(listFiles(dir).filter((f) => f.startsWith("img/"))).toEqual([]);
      expect(existsSync(dir)).toBe(true);
    } finally {
      rmSync(parent, { recursive: true, force: true });
    }
  }, 60_000);
});
