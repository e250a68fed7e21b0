/**
 * A channel pointed at another place (its path, bucket, endpoint or host changed) kept its copies
 * recorded done, so the only-copy guard let the other channels be deleted while the new place held
 * nothing, and the images answered 503 after the next start. Two channels at one place each
 * counted the same bytes as their own copy, and a purge of one deleted the other's objects.
 */
import { describe, expect, test } from "bun:test";
import { existsSync, mkdtempSync, renameSync, rmSync, symlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { expectError } from "../helpers/client";
import { listFiles } from "../helpers/files";
import { useAdmin } from "../helpers/fixture";
import { form, makeJpeg } from "../helpers/images";
import { PausePoints } from "../helpers/pause-points";
import { replicaOn, waitAllReplicasDone, waitReplicaState } from "./channels.helpers";

const channelBody = (name: string, path: string, priority = 0) => ({ name, priority, allow_direct_link: false, driver: "local", config: { path } });

const pauses = new PausePoints();

describe("moving a channel", () => {
  const { server, admin } = useAdmin({ env: pauses.env("replicate.put") });
  const builtIn = async () => (await admin.json("GET", "/api/admin/channels")).items.find((c: { name: string }) => c.name === "local").id as number;

  // First in the file: no earlier image is being copied to the new channel when the pause is armed.
  test("a copy on its way while the channel moves is made again at the new place, not recorded done at the old one", async () => {
    const parent = mkdtempSync(join(tmpdir(), "kura-move-inflight-"));
    try {
      const ch = await admin.json("POST", "/api/admin/channels", channelBody("travelling", join(parent, "old")), 201);
      pauses.arm("replicate.put", `channel=${ch.id} `);
      const image = await admin.json("POST", "/api/admin/upload", form(await makeJpeg(40, 30, 90), "t.jpg"));
      await pauses.held("replicate.put");
      const fresh = join(parent, "new");
      await admin.json("PUT", `/api/admin/channels/${ch.id}`, channelBody("travelling", fresh));
      pauses.release("replicate.put");

      await waitReplicaState(admin, image.id, ch.id, "done");
      const sha = (await admin.json("GET", `/api/admin/images/${image.id}`)).sha256 as string;
      const there = existsSync(fresh) && listFiles(fresh).some((f) => f.includes(sha));
      expect({ doneAtNewPlace: there }).toEqual({ doneAtNewPlace: true });
    } finally {
      pauses.release("replicate.put");
      const travelling = (await admin.json("GET", "/api/admin/channels")).items.find((c: { name: string }) => c.name === "travelling");
      if (travelling) await admin.request("DELETE", `/api/admin/channels/${travelling.id}?purge=false`);
      rmSync(parent, { recursive: true, force: true });
    }
  });

  test("its copies are no longer counted until they are at the new place: copied there again, every file present", async () => {
    const parent = mkdtempSync(join(tmpdir(), "kura-move-"));
    try {
      const ch = await admin.json("POST", "/api/admin/channels", channelBody("mobile", join(parent, "old")), 201);
      const ids: string[] = [];
      for (let i = 0; i < 4; i++) ids.push((await admin.json("POST", "/api/admin/upload", form(await makeJpeg(40, 30, 100 + i), `m${i}.jpg`))).id);
      for (const id of ids) await waitAllReplicasDone(admin, id, 2);

      const fresh = join(parent, "new");
      await admin.json("PUT", `/api/admin/channels/${ch.id}`, channelBody("mobile", fresh));
      // Right after the move no copy on it counts as done unless its file is at the new place.
      for (const id of ids) {
        const replica = await replicaOn(admin, id, ch.id);
        const sha = (await admin.json("GET", `/api/admin/images/${id}`)).sha256 as string;
        const there = existsSync(fresh) && listFiles(fresh).some((f) => f.includes(sha));
        // (read in this order: a copy recorded done was written first, so its file is there by now)
        expect({ id, countedWithoutFile: replica?.state === "done" && !there }).toEqual({ id, countedWithoutFile: false });
      }
      for (const id of ids) await waitReplicaState(admin, id, ch.id, "done");
      const files = listFiles(fresh);
      const shas = await Promise.all(ids.map(async (id) => (await admin.json("GET", `/api/admin/images/${id}`)).sha256 as string));
      expect(shas.filter((sha) => !files.some((f) => f.startsWith("img/") && f.includes(sha)))).toEqual([]);
      await admin.request("DELETE", `/api/admin/channels/${ch.id}?purge=false`);
    } finally {
      rmSync(parent, { recursive: true, force: true });
    }
  });

  test("moved with its files (the directory renamed, the path changed): images stay readable and the copies are confirmed in place", async () => {
    const parent = mkdtempSync(join(tmpdir(), "kura-move-files-"));
    const channel = await builtIn();
    const storage = join(server.dataDir, "storage");
    try {
      const ids: string[] = [];
      for (let i = 0; i < 24; i++) ids.push((await admin.json("POST", "/api/admin/upload", form(await makeJpeg(40, 30, 200 + i), `f${i}.jpg`))).id);
      const moved = join(parent, "disk");
      renameSync(storage, moved);
      await admin.json("PUT", `/api/admin/channels/${channel}`, channelBody("local", moved, 0));
      // Read at once, while the copies are being confirmed: served from the channel's unconfirmed copies.
      const statuses = await Promise.all(ids.map(async (id) => await fetch(server.url(`/i/${id}`)).then(async (r) => (await r.arrayBuffer(), r.status))));
      expect(statuses).toEqual(ids.map(() => 200));
      for (const id of ids) await waitReplicaState(admin, id, channel, "done");
      await server.waitForLog(/渠道上的对象完好，副本已恢复/);
    } finally {
      await admin.json("PUT", `/api/admin/channels/${channel}`, channelBody("local", storage, 0)).catch(() => undefined);
      if (existsSync(join(parent, "disk")) && !existsSync(storage)) renameSync(join(parent, "disk"), storage);
      rmSync(parent, { recursive: true, force: true });
    }
  }, 60_000);

  test("a second channel at the same place is refused, however the path is spelled; so is moving one onto another", async () => {
    const parent = mkdtempSync(join(tmpdir(), "kura-same-place-"));
    try {
      const storage = join(server.dataDir, "storage");
      const conflict = async (body: unknown, method = "POST", path = "/api/admin/channels") => {
        const message = await expectError(await admin.request(method, path, body), 409);
        expect(message).toContain("已使用同一存储位置");
        expect(message).not.toContain(parent);
      };
      await conflict(channelBody("twin", storage));
      await conflict(channelBody("twin", `${storage}/`));
      symlinkSync(storage, join(parent, "link"));
      await conflict(channelBody("twin", join(parent, "link")));
      const other = await admin.json("POST", "/api/admin/channels", channelBody("other", join(parent, "other")), 201);
      await conflict(channelBody("other", storage), "PUT", `/api/admin/channels/${other.id}`);
      // An encrypted channel names its objects with its own keys: it shares none, so it may live there.
      const sealed = await admin.json("POST", "/api/admin/channels", { ...channelBody("sealed", storage), encrypted: true }, 201);
      await admin.request("DELETE", `/api/admin/channels/${sealed.id}?purge=false`);
      await admin.request("DELETE", `/api/admin/channels/${other.id}?purge=false`);

      // Two creates at one new place sent together: both passed a check made before their probes.
      const shared = join(parent, "shared");
      const raced = await Promise.all(["a", "b", "c"].map((n) => admin.request("POST", "/api/admin/channels", channelBody(`race-${n}`, shared))));
      expect(raced.map((r) => r.status).sort()).toEqual([201, 409, 409]);
      const winner = raced.find((r) => r.status === 201);
      if (winner) await admin.request("DELETE", `/api/admin/channels/${(await winner.json()).id}?purge=false`);
    } finally {
      rmSync(parent, { recursive: true, force: true });
    }
  });
});
