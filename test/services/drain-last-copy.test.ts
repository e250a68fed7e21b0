/**
 * A purge drain never deletes the last completed copy of a live image (race audit H2). The purge
 * was accepted while another channel held a copy too; that copy was then found damaged (marked
 * `failed`), so the draining channel now holds the only good one. In process over the real
 * context: replica states are set directly, the drain is run as its job would run it.
 */
import { expect, test } from "bun:test";
import { copyFileSync, existsSync, mkdirSync, rmSync } from "node:fs";
import { dirname, join } from "node:path";
import { DRAIN_BATCH, deleteChannel, runDrain } from "../../src/channels/drain";
import { createChannel } from "../../src/channels/service";
import type { Driver, ObjectInfo } from "../../src/channels/driver";
import type { AppContext } from "../../src/context";
import { deleteReference } from "../../src/images/delete";
import { openBlob } from "../../src/images/read";
import { storageKeyFor } from "../../src/images/storage-key";
import type { UserRow } from "../../src/users/repo";
import { makeJpeg } from "../helpers/images";
import { serviceContextPerTest, thrown, uploadBytes } from "./harness";

let app: AppContext;
let admin: UserRow;
let dataDir: string;
serviceContextPerTest((ctx) => ({ app, admin, dataDir } = ctx));

const jobCtx = () => ({ id: 1, kind: "channel.drain", attempt: 1, maxAttempts: 10, signal: new AbortController().signal, heartbeat: () => true });

function setReplica(blobId: number, channelId: number, state: string) {
  app.db
    .query("INSERT OR REPLACE INTO blob_channels (blob_id, channel_id, state, updated_at) VALUES (?, ?, ?, '2026-01-01 00:00:00')")
    .run(blobId, channelId, state);
}

test("the draining channel's copy that became the last good one stays, is copied elsewhere first, then goes", async () => {
  const local = app.channels.list().find((c) => c.row.name === "local")!;
  const twoDir = join(dataDir, "two");
  mkdirSync(twoDir);
  const two = await createChannel(app, admin, { name: "two", driver: "local", config: { path: twoDir }, priority: 1 });
  const { id } = await uploadBytes(app, admin.id, await makeJpeg(64, 48, 8181));
  const blob = app.images.blob(app.images.view(id)!.blob_id)!;
  // Both channels hold a completed copy, so the purge of "two" is accepted.
  const twoObject = join(twoDir, blob.storage_key);
  const localObject = join(dataDir, "storage", blob.storage_key);
  // The upload wrote to one of them; the copy to the other is made here instead of by a job.
  const [from, to] = existsSync(twoObject) ? [twoObject, localObject] : [localObject, twoObject];
  mkdirSync(dirname(to), { recursive: true });
  copyFileSync(from, to);
  setReplica(blob.id, local.row.id, "done");
  setReplica(blob.id, two.id, "done");
  expect(deleteChannel(app, { id: admin.id, name: admin.name }, two.id, true)).toBe(202);

  // Then the copy on "local" is found damaged: the one on "two" is the last good one.
  setReplica(blob.id, local.row.id, "failed");
  const err = (await thrown(() => runDrain(app, { channel_id: two.id }, jobCtx()))) as Error;
  const reason = "1 个图片对象是唯一的完整副本，已安排复制到其他渠道，复制完成后继续清空";
  expect(err.message).toBe(reason);
  expect(existsSync(twoObject)).toBe(true);
  expect(app.channels.repo.byId(two.id)?.deleting).toBeTruthy();
  const alert = app.db.query<{ message: string }, []>("SELECT message FROM alerts WHERE kind = 'drain_failed' AND resolved_at = ''").get();
  expect(alert?.message).toBe(`存储渠道 two 清空失败：${reason}`);
  const queued = app.db
    .query<{ payload: string }, []>("SELECT payload FROM jobs WHERE kind = 'blob.replicate' AND state IN ('available', 'retryable')")
    .all()
    .map((j) => JSON.parse(j.payload));
  expect(queued).toContainEqual({ blob_id: blob.id, channel_id: local.row.id });

  // Once the copy to "local" is done, the next attempt deletes the object and removes the channel.
  setReplica(blob.id, local.row.id, "done");
  await runDrain(app, { channel_id: two.id }, jobCtx());
  expect(existsSync(twoObject)).toBe(false);
  expect(app.channels.repo.byId(two.id)).toBeUndefined();
  expect(app.db.query("SELECT 1 FROM alerts WHERE kind = 'drain_failed' AND resolved_at = ''").get()).toBeNull();
});

test("a re-upload of bytes whose only copy is on a channel being purged stores them again, not a reference to nothing", async () => {
  const twoDir = join(dataDir, "two");
  mkdirSync(twoDir);
  // The best channel: the upload's one synchronous copy goes there (the copy to "local" never runs here).
  const two = await createChannel(app, admin, { name: "two", driver: "local", config: { path: twoDir }, priority: 100 });
  const bytes = await makeJpeg(64, 48, 4242);
  const first = await uploadBytes(app, admin.id, bytes);
  const blob = app.images.blob(app.images.view(first.id)!.blob_id)!;
  const object = join(twoDir, blob.storage_key);
  expect(existsSync(object)).toBe(true);
  // Deleted, the blob waits out its grace; a blob marked for deletion is nobody's sole copy, so the purge is accepted.
  expect(deleteReference(app, first.id)).toBe(true);
  expect(deleteChannel(app, { id: admin.id, name: admin.name }, two.id, true)).toBe(202);
  // The drain deletes the object; the channel's row (and its done replica row) goes last.
  rmSync(object);
  const again = await uploadBytes(app, admin.id, bytes);
  await runDrain(app, { channel_id: two.id }, jobCtx());
  const stored = app.images.blob(app.images.view(again.id)!.blob_id)!;
  const source = await openBlob(app, stored);
  expect(Buffer.from(await new Response(source.stream).arrayBuffer()).equals(bytes)).toBe(true);
});

test("a kept last copy in a drain of more than one round is not mistaken for a peer that lists deleted keys again", async () => {
  const local = app.channels.list().find((c) => c.row.name === "local")!;
  const twoDir = join(dataDir, "two");
  mkdirSync(twoDir);
  const two = await createChannel(app, admin, { name: "two", driver: "local", config: { path: twoDir }, priority: 1 });
  // More of our objects than one round takes, each with a done copy on both channels.
  const keys: string[] = [];
  const blob = app.db.query(
    "INSERT INTO blobs (sha256, storage_key, mime, size, width, height, ref_count, created_at) VALUES (?, ?, 'image/png', 1, 1, 1, 1, '2026-01-01 00:00:00')",
  );
  app.db.transaction(() => {
    for (let i = 0; i < DRAIN_BATCH + 10; i++) {
      const sha = new Bun.CryptoHasher("sha256").update(String(i)).digest("hex");
      const key = storageKeyFor(sha, "png");
      const id = Number(blob.run(sha, key).lastInsertRowid);
      setReplica(id, local.row.id, "done");
      setReplica(id, two.id, "done");
      keys.push(key);
    }
  })();
  keys.sort();
  // "two" as a listing of what it holds, in key order, whose deletes are real.
  const held = new Set(keys);
  const driver = app.channels.get(two.id)!.driver as Driver;
  driver.delete = async (key: string) => void held.delete(key);
  driver.list = async function* (prefix: string): AsyncIterable<ObjectInfo> {
    for (const key of [...held].sort()) if (key.startsWith(prefix)) yield { key, size: 1 };
  };
  expect(deleteChannel(app, { id: admin.id, name: admin.name }, two.id, true)).toBe(202);
  // The first-listed object's other copy is found damaged: "two" holds its last good copy.
  const firstBlob = app.db.query<{ id: number }, [string]>("SELECT id FROM blobs WHERE storage_key = ?").get(keys[0]!)!.id;
  setReplica(firstBlob, local.row.id, "failed");

  const err = (await thrown(() => runDrain(app, { channel_id: two.id }, jobCtx()))) as Error;
  expect(err.message).toBe("1 个图片对象是唯一的完整副本，已安排复制到其他渠道，复制完成后继续清空");
  expect([...held]).toEqual([keys[0]]); // every other object went, in both rounds
}, 120_000);
