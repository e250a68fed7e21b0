/**
 * Two uploads of the same bytes at once: both find no blob when they start, so each writes its
 * own object, and the one that commits second becomes a reference to the first one's blob. Its
 * own object is then nobody's: it must be deleted at once (not left to the daily reconciliation),
 * and it must not be recorded as a replica of a blob whose key it does not hold.
 *
 * Deterministic: the first upload is paused after its write, before its commit (test-only pause
 * point `upload.commit`), while the second one runs through.
 *
 * Bytes whose blob lost every copy are written again under that blob's key, so two such uploads at
 * once wrote the same object: the one that failed (or was overtaken) deleted it in its undo while
 * the other had not committed yet, and that one then answered 200 for an image nobody could read.
 */
import { Database } from "bun:sqlite";
import { expect, test } from "bun:test";
import { existsSync, mkdirSync, rmSync } from "node:fs";
import { join } from "node:path";
import { useAdmin } from "../helpers/fixture";
import { PausePoints } from "../helpers/pause-points";
import { listFiles } from "../helpers/files";
import { form, makeJpeg, sha256 } from "../helpers/images";

const pauses = new PausePoints();
const { server, admin } = useAdmin({ env: pauses.env("upload.commit", "upload.rewrite-queued") });

function readDb<T>(sql: string, ...params: (string | number)[]): T[] {
  const db = new Database(join(server.dataDir, "kura.db"), { readonly: true });
  try {
    return db.query(sql).all(...params) as T[];
  } finally {
    db.close();
  }
}

test("the upload that commits second keeps no object of its own: one file, one blob, one replica, both links serve the bytes", async () => {
  const bytes = await makeJpeg(160, 120, 4242);
  const upload = (name: string) => admin.json<{ id: string }>("POST", "/api/admin/upload", form(bytes, name, { exif_policy: "passthrough" }));

  pauses.arm("upload.commit");
  let first: Promise<{ id: string }> | undefined;
  let secondId = "";
  try {
    first = upload("first.jpg");
    await server.waitForLog(/kura-test-hook paused point=upload\.commit key=\S+/, 20_000);
    // The paused upload's object is written; the second finds no blob either and writes its own.
    secondId = (await upload("second.jpg")).id;
  } finally {
    pauses.release("upload.commit");
  }
  const firstId = (await first).id;

  const blobs = readDb<{ id: number; storage_key: string; ref_count: number }>("SELECT id, storage_key, ref_count FROM blobs");
  expect(blobs.length).toBe(1);
  expect(blobs[0]!.ref_count).toBe(2);
  const objects = listFiles(join(server.dataDir, "storage")).filter((f) => f.includes(sha256(bytes)));
  expect(objects).toEqual([blobs[0]!.storage_key]);
  expect(readDb("SELECT channel_id, state FROM blob_channels")).toEqual([{ channel_id: 1, state: "done" }]);
  expect(readDb("SELECT id FROM upload_intents")).toEqual([]);

  for (const id of [firstId, secondId]) {
    const res = await fetch(server.url(`/i/${id}`));
    expect(Buffer.from(await res.arrayBuffer()).equals(bytes)).toBe(true);
  }
});

test("two re-uploads of bytes whose copies were all lost: the one that fails leaves the other's object, which serves its image", async () => {
  const bytes = await makeJpeg(150, 100, 4343);
  const digest = sha256(bytes);
  const upload = (name: string) => admin.request("POST", "/api/admin/upload", form(bytes, name, { exif_policy: "passthrough" }));
  const first = await admin.json<{ id: string }>("POST", "/api/admin/upload", form(bytes, "first.jpg", { exif_policy: "passthrough" }));
  const [lost] = readDb<{ id: number; storage_key: string }>("SELECT id, storage_key FROM blobs WHERE sha256 = ?", digest);
  const object = join(server.dataDir, "storage", lost!.storage_key);
  // The blob's only object goes missing; the read that finds out marks the replica failed.
  rmSync(object);
  expect((await fetch(server.url(`/i/${first.id}`))).status).not.toBe(200);
  for (
    const deadline = Date.now() + 20_000;
    readDb<{ state: string }>("SELECT state FROM blob_channels WHERE blob_id = ?", lost!.id)[0]?.state !== "failed";
  ) {
    if (Date.now() > deadline) throw new Error("the replica was never marked failed");
    await Bun.sleep(25);
  }
  // A second channel below the built-in one where this key cannot be written (a directory holds its
  // place): an upload that must write two copies writes the built-in one, fails here and undoes.
  const bDir = join(server.dataDir, "channel-b");
  mkdirSync(join(bDir, lost!.storage_key), { recursive: true });
  await admin.json("POST", "/api/admin/channels", { name: "b", driver: "local", config: { path: bDir }, priority: -1000 }, 201);

  pauses.arm("upload.commit", "wrote=1");
  let paused: Promise<Response> | undefined;
  let other: Promise<Response> | undefined;
  try {
    // Written again under the blob's key (one copy asked for), waiting to commit.
    paused = upload("again.jpg");
    await pauses.held("upload.commit");
    await admin.json("PUT", "/api/admin/config", { min_success: 2 });
    // The other one writes the same key, fails on B and undoes its writes, or waits for the first.
    let settled = false;
    other = upload("other.jpg").finally(() => {
      settled = true;
    });
    for (const deadline = Date.now() + 20_000; !settled && !server.logs.includes("point=upload.rewrite-queued"); ) {
      if (Date.now() > deadline) throw new Error("the second re-upload neither ended nor queued");
      await Bun.sleep(25);
    }
  } finally {
    pauses.release("upload.commit");
  }
  try {
    const again = await paused;
    expect(again.status).toBe(200);
    const { id } = (await again.json()) as { id: string };
    const res = await fetch(server.url(`/i/${id}`));
    expect(res.status).toBe(200);
    expect(sha256(Buffer.from(await res.arrayBuffer()))).toBe(digest);
    expect(existsSync(object)).toBe(true);
    // Waited for the first and found its copy: a reference to the same blob.
    const second = await other!;
    expect(second.status).toBe(200);
  } finally {
    await admin.json("PUT", "/api/admin/config", { min_success: 1 });
  }
});
