/**
 * kura_channel_puts_total is labelled by channel name: the series of a name no channel has any
 * more (renamed, deleted) go from /metrics instead of staying for the life of the process
 * (memory audit L2), and a put that ends after the rename does not bring the old name back.
 */
import { Database } from "bun:sqlite";
import { expect, test } from "bun:test";
import { mkdirSync, rmSync } from "node:fs";
import { join } from "node:path";
import { useAdmin } from "../helpers/fixture";
import { PausePoints } from "../helpers/pause-points";
import { waitAllReplicasDone } from "./channels.helpers";
import { form, makeJpeg } from "../helpers/images";

const pauses = new PausePoints();
const { server, admin } = useAdmin({ env: pauses.env("replicate.put") });
const metrics = async () => (await fetch(server.url("/metrics"))).text();

test("renaming and deleting a channel drop its put series; the others stay", async () => {
  const dir = join(server.dataDir, "fast");
  mkdirSync(dir);
  // The best channel, so the upload's synchronous put goes there.
  const { id } = await admin.json<{ id: number }>("POST", "/api/admin/channels", { name: "fast", driver: "local", config: { path: dir }, priority: 1000 }, 201);
  await admin.json("POST", "/api/admin/upload", form(await makeJpeg(20, 20, 61), "a.jpg"));
  expect(await metrics()).toMatch(/kura_channel_puts_total\{channel="fast",result="ok"\} 1/);

  const view = await admin.json("GET", `/api/admin/channels/${id}/config`);
  await admin.json("PUT", `/api/admin/channels/${id}`, { name: "renamed", priority: 1000, allow_direct_link: false, driver: "local", config: view.config });
  await admin.json("POST", "/api/admin/upload", form(await makeJpeg(20, 20, 62), "b.jpg"));
  let text = await metrics();
  expect(text).not.toContain('kura_channel_puts_total{channel="fast"');
  expect(text).toMatch(/kura_channel_puts_total\{channel="renamed",result="ok"\} 1/);

  // Refused (409) while it holds the only copy of an image: the copies to the built-in channel come first.
  const deadline = Date.now() + 20_000;
  while ((await admin.request("DELETE", `/api/admin/channels/${id}?purge=false`)).status !== 204) {
    if (Date.now() > deadline) throw new Error("the channel could not be deleted");
    await Bun.sleep(50);
  }
  text = await metrics();
  expect(text).not.toContain('kura_channel_puts_total{channel="renamed"');
  // The built-in channel's series (replication wrote both images there) is untouched.
  expect(text).toMatch(/kura_channel_puts_total\{channel="local",result="ok"\} [1-9]/);
});

test("a copy that lands after its channel was renamed counts under the new name; the old name's series does not come back", async () => {
  const dir = join(server.dataDir, "late");
  mkdirSync(dir);
  // Below the built-in channel: the upload writes there, and a replication job copies to this one.
  const { id } = await admin.json<{ id: number }>(
    "POST",
    "/api/admin/channels",
    { name: "late", driver: "local", config: { path: dir }, priority: -1000 },
    201,
  );
  // Replicas on this channel not done yet (the backfill of earlier images and the new upload's copy).
  const copiesLeft = () => {
    const db = new Database(join(server.dataDir, "kura.db"), { readonly: true });
    try {
      return (db.query("SELECT count(*) AS n FROM blob_channels WHERE channel_id = ? AND state != 'done'").get(id) as { n: number }).n;
    } finally {
      db.close();
    }
  };
  const putSeries = async () => (await metrics()).split("\n").filter((line) => line.startsWith("kura_channel_puts_total{"));

  // The job to this channel stops before its put: it has read the channel (and its name) already.
  pauses.arm("replicate.put", `channel=${id} `);
  try {
    await admin.json("POST", "/api/admin/upload", form(await makeJpeg(20, 20, 63), "c.jpg"));
    await pauses.held("replicate.put");
    const view = await admin.json("GET", `/api/admin/channels/${id}/config`);
    await admin.json("PUT", `/api/admin/channels/${id}`, {
      name: "late-renamed",
      priority: -1000,
      allow_direct_link: false,
      driver: "local",
      config: view.config,
    });
  } finally {
    pauses.release("replicate.put");
  }
  const deadline = Date.now() + 20_000;
  while (copiesLeft() > 0) {
    if (Date.now() > deadline) throw new Error("the copies to the channel never finished");
    await Bun.sleep(25);
  }

  const series = await putSeries();
  expect(series.filter((line) => line.includes('channel="late"'))).toEqual([]);
  expect(series.some((line) => /^kura_channel_puts_total\{channel="late-renamed",result="ok"\} [1-9]/.test(line))).toBe(true);
});

test("reads of an original count per channel: a failover is an error on the channel that lost it, ok on the one that served", async () => {
  const dir = join(server.dataDir, "reads");
  mkdirSync(dir);
  const { id: channelId } = await admin.json<{ id: number }>(
    "POST",
    "/api/admin/channels",
    { name: "reads", driver: "local", config: { path: dir }, priority: 2000 },
    201,
  );
  const { id } = await admin.json("POST", "/api/admin/upload", form(await makeJpeg(300, 200, 64), "r.jpg"));
  // Copied everywhere first, so a channel is there to fail over to.
  await waitAllReplicasDone(admin, id, 3);
  // Its copy on the best channel is lost: a render reads the original, fails over and says so.
  const db = new Database(join(server.dataDir, "kura.db"), { readonly: true });
  const key = (db.query("SELECT b.storage_key AS k FROM images i JOIN blobs b ON b.id = i.blob_id WHERE i.id = ?").get(id) as { k: string }).k;
  db.close();
  rmSync(join(dir, key));
  const series = async (channel: string, result: string) => {
    const line = (await metrics()).split("\n").find((l) => l.startsWith(`kura_channel_reads_total{channel="${channel}",result="${result}"} `));
    return line ? Number(line.split(" ")[1]) : 0;
  };
  // Whichever other channel holds a done copy by then (replication to the others runs meanwhile) serves it.
  const servedElsewhere = async () => (await series("local", "ok")) + (await series("late", "ok"));
  const before = { lost: await series("reads", "error"), served: await servedElsewhere() };
  const res = await fetch(server.url(`/i/${id}?format=webp`));
  await res.arrayBuffer();
  expect(res.status).toBe(200);
  expect(await series("reads", "error")).toBe(before.lost + 1);
  expect(await servedElsewhere()).toBeGreaterThan(before.served);
  expect(channelId).toBeGreaterThan(0);
});
