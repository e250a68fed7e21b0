/**
 * storeReference when the world moves under an upload, in-process with recording channels
 * (test/helpers/store-channels.ts): writes that fail on full disks, channels taken out of service
 * mid-write, plans outdated again and again, a concurrent upload of the same bytes committing first,
 * the queue of uploads rewriting a blob's lost bytes, undo keeping what a blob owns, and the start-up
 * recovery dropping the cached variants of blobs that never committed.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { AppContext } from "../../src/context";
import { sqlTime } from "../../src/db/time";
import { Unavailable } from "../../src/errors";
import { resolveUploadIntents, storeReference } from "../../src/images/store";
import { storageKeyFor } from "../../src/images/storage-key";
import type { CapturedLog } from "../helpers/context";
import { openContext } from "../helpers/context";
import { type FakeChannel, installFakeChannels, preparedUpload, resetFakeChannels, storeOutcome, uploadRef } from "../helpers/store-channels";

const dir = mkdtempSync(join(tmpdir(), "kura-store-replans-"));
let app: AppContext;
let close: () => void;
let logs: CapturedLog[] = [];
let a: FakeChannel;
let b: FakeChannel;
let c: FakeChannel;

beforeAll(async () => {
  ({ app, close, logs } = await openContext(dir));
  [a, b, c] = installFakeChannels(app, ["a", "b", "c"]) as [FakeChannel, FakeChannel, FakeChannel];
});
afterAll(() => {
  close();
  rmSync(dir, { recursive: true, force: true });
});
beforeEach(() => {
  resetFakeChannels([a, b, c]);
  app.db.query("UPDATE channels SET deleting = 0").run();
  app.settings.update({ min_success: 1 });
  app.db.query("UPDATE users SET quota_bytes = NULL").run();
});

const one = <T>(sql: string, ...args: (string | number)[]) => app.db.query(sql).get(...args) as T;
const intents = () => one<{ n: number }>("SELECT COUNT(*) AS n FROM upload_intents").n;
const blobOf = (sha256: string) => one<{ id: number; storage_key: string; ref_count: number } | null>("SELECT * FROM blobs WHERE sha256 = ?", sha256);
const replicaState = (blobId: number, ch: FakeChannel) =>
  one<{ state: string } | null>("SELECT state FROM blob_channels WHERE blob_id = ? AND channel_id = ?", blobId, ch.row.id)?.state;
/** Marked for deletion, as the registry and the database both see it after DELETE /api/admin/channels/:id. */
function takeOutOfService(ch: FakeChannel) {
  ch.row.deleting = 1;
  app.db.query("UPDATE channels SET deleting = 1 WHERE id = ?").run(ch.row.id);
}
/** The objects this test's puts left on a channel (earlier tests' objects stay in its map). */
const kept = (ch: FakeChannel) => ch.puts.filter((key) => ch.objects.has(key));
const turn = () => new Promise<void>((resolve) => setImmediate(resolve));
async function until(done: () => boolean) {
  for (let i = 0; i < 1000 && !done(); i++) await turn();
  expect(done()).toBe(true);
}
function gate() {
  let open!: () => void;
  const closed = new Promise<void>((resolve) => (open = resolve));
  return { closed, open };
}
const diskFull = (channel: string) => Object.assign(new Error(`ENOSPC: no space left on device, write (${channel})`), { code: "ENOSPC" });

describe("failed and skipped synchronous writes", () => {
  test("every channel's disk full: the client hears the full disk (a retryable 503 over HTTP); one other failure among them makes it the plain 503", async () => {
    const failedBefore = logs.filter((l) => l.level === "WARN").length;
    a.putError = diskFull("a");
    b.putError = diskFull("b");
    c.putError = diskFull("c");
    const p = preparedUpload();
    const thrown = await storeReference(app, p, uploadRef()).catch((e: unknown) => e);
    expect(thrown).toBe(a.putError);
    expect([a, b, c].map((ch) => ch.puts.length)).toEqual([1, 1, 1]);
    expect(blobOf(p.sha256)).toBeNull();
    expect(intents()).toBe(0);
    // Each failed write is logged with its channel before the next one is tried.
    const warned = logs.filter((l) => l.level === "WARN").slice(failedBefore);
    expect(warned.map((l) => [l.msg, l.fields.channel, l.fields.err])).toEqual(
      ["a", "b", "c"].map((name) => ["同步写入存储渠道失败，尝试下一个", `fake-${name}`, `ENOSPC: no space left on device, write (${name})`]),
    );

    b.putError = new Error("连接被重置（测试）");
    expect(await storeOutcome(storeReference(app, preparedUpload(), uploadRef()))).toBe("503:成功写入的存储渠道数量不足，请稍后重试");
  });

  test("every write stopped by the descriptor limit: that error is what the client hears (a 503 on every surface); a disk full among them makes it the plain 503", async () => {
    const emfile = (channel: string) => Object.assign(new Error(`EMFILE: too many open files, open '${channel}'`), { code: "EMFILE" });
    a.putError = emfile("a");
    b.putError = emfile("b");
    c.putError = emfile("c");
    const p = preparedUpload();
    expect(await storeReference(app, p, uploadRef()).catch((e: unknown) => e)).toBe(a.putError);
    expect(blobOf(p.sha256)).toBeNull();
    expect(intents()).toBe(0);

    b.putError = diskFull("b");
    expect(await storeOutcome(storeReference(app, preparedUpload(), uploadRef()))).toBe("503:成功写入的存储渠道数量不足，请稍后重试");
  });

  test("channels marked for deletion while an earlier one was written are skipped, not written: too few copies is the plain 503", async () => {
    app.settings.update({ min_success: 2 });
    a.onPut = () => {
      takeOutOfService(b);
      takeOutOfService(c);
    };
    const p = preparedUpload();
    expect(await storeOutcome(storeReference(app, p, uploadRef()))).toBe("503:成功写入的存储渠道数量不足，请稍后重试");
    expect([a, b, c].map((ch) => ch.puts.length)).toEqual([1, 0, 0]);
    expect(a.deletes).toEqual(a.puts); // the one copy written is removed again
    expect(kept(a)).toEqual([]);
    expect(blobOf(p.sha256)).toBeNull();
    expect(intents()).toBe(0);
  });
});

describe("plans outdated by the commit", () => {
  test("a copy whose channel is marked for deletion while it was written is a new plan on the channels left; the third outdated plan is a 503 to retry in a second", async () => {
    for (const ch of [a, b]) ch.onPut = () => takeOutOfService(ch);
    const p = preparedUpload();
    await storeReference(app, p, uploadRef());
    const blob = blobOf(p.sha256)!;
    // Three plans, each under a fresh key on the best channel still in service.
    expect([a, b, c].map((ch) => ch.puts.length)).toEqual([1, 1, 1]);
    expect(new Set([...a.puts, ...b.puts, ...c.puts]).size).toBe(3);
    expect(c.puts).toEqual([blob.storage_key]);
    expect([a.deletes, b.deletes]).toEqual([a.puts, b.puts]);
    expect([kept(a), kept(b)]).toEqual([[], []]);
    expect(replicaState(blob.id, c)).toBe("done");
    expect(intents()).toBe(0);

    resetFakeChannels([a, b, c]);
    app.db.query("UPDATE channels SET deleting = 0").run();
    for (const ch of [a, b, c]) ch.onPut = () => takeOutOfService(ch);
    const q = preparedUpload();
    const thrown = await storeReference(app, q, uploadRef()).catch((e: unknown) => e);
    expect(thrown).toBeInstanceOf(Unavailable);
    expect([(thrown as Unavailable).message, (thrown as Unavailable).retryAfterSeconds]).toEqual(["图片存储状态正在变化，请稍后重试", 1]);
    expect([a, b, c].map((ch) => ch.puts.length)).toEqual([1, 1, 1]);
    expect([a, b, c].map(kept)).toEqual([[], [], []]);
    expect(blobOf(q.sha256)).toBeNull();
    expect(intents()).toBe(0);
  });

  test("one of two copies marked for deletion while written still commits: the plan holds while any written channel is in service", async () => {
    app.settings.update({ min_success: 2 });
    b.onPut = () => takeOutOfService(b);
    const p = preparedUpload();
    await storeReference(app, p, uploadRef());
    expect([a, b, c].map((ch) => ch.puts.length)).toEqual([1, 1, 0]);
    const blob = blobOf(p.sha256)!;
    expect([replicaState(blob.id, a), replicaState(blob.id, b), replicaState(blob.id, c)]).toEqual(["done", "done", "pending"]);
  });

  test("the upload that commits second records no copy of its own: its object is deleted and its channel waits for replication", async () => {
    const p = preparedUpload();
    const held = gate();
    a.gate = held.closed;
    const first = storeReference(app, p, uploadRef());
    await until(() => a.puts.length === 1);
    a.healthy = false; // the second upload writes elsewhere and commits first
    await storeReference(app, p, uploadRef());
    const blob = blobOf(p.sha256)!;
    expect(b.puts).toEqual([blob.storage_key]);
    held.open();
    await first;
    expect(a.puts[0]).not.toBe(blob.storage_key);
    expect(a.deletes).toEqual(a.puts);
    expect(kept(a)).toEqual([]);
    expect(blobOf(p.sha256)!.ref_count).toBe(2);
    expect([replicaState(blob.id, a), replicaState(blob.id, b)]).toEqual(["pending", "done"]);
    expect(intents()).toBe(0);
  });
});

describe("rewriting a blob's lost bytes", () => {
  /** A blob whose only done copy is on `a`, which is then marked for deletion: its bytes must be written again. */
  async function blobWithoutCopiesInService() {
    const p = preparedUpload();
    await storeReference(app, p, uploadRef());
    const blob = blobOf(p.sha256)!;
    takeOutOfService(a);
    resetFakeChannels([b, c]);
    return { p, blob };
  }

  test("an upload that fails after rewriting keeps the object if a copy of the blob landed there meanwhile, and removes it otherwise", async () => {
    const { p, blob } = await blobWithoutCopiesInService();
    // A replication job copying from the draining channel finishes on b while the upload writes there.
    b.onPut = () => {
      app.images.setReplica(blob.id, b.row.id, "done");
      app.db.query("UPDATE users SET quota_bytes = 1 WHERE id = 'default'").run();
    };
    expect(await storeOutcome(storeReference(app, p, uploadRef()))).toBe("403:存储配额已满");
    expect(b.puts).toEqual([blob.storage_key]);
    expect(b.deletes).toEqual([]);
    expect(b.objects.has(blob.storage_key)).toBe(true);
    expect(intents()).toBe(0);

    // Without that copy the rewritten object is nobody's (a's done copy on the draining channel is not b's).
    app.db.query("UPDATE users SET quota_bytes = NULL").run();
    app.db.query("DELETE FROM blob_channels WHERE blob_id = ? AND channel_id = ?").run(blob.id, b.row.id);
    b.objects.clear();
    b.onPut = () => void app.db.query("UPDATE users SET quota_bytes = 1 WHERE id = 'default'").run();
    expect(await storeOutcome(storeReference(app, p, uploadRef()))).toBe("403:存储配额已满");
    expect(b.deletes).toEqual([blob.storage_key]);
    expect(b.objects.has(blob.storage_key)).toBe(false);
    expect(intents()).toBe(0);
  });

  test("uploads of the same lost bytes rewrite one at a time in arrival order, even when the first one fails and later ones arrive mid-way", async () => {
    const { p, blob } = await blobWithoutCopiesInService();
    const firstHeld = gate();
    b.gate = firstHeld.closed;
    // The first is refused at its commit (its uploader is gone), after writing under the blob's key.
    const failing = storeOutcome(storeReference(app, p, uploadRef({ userId: "nobody" })));
    await until(() => b.puts.length === 1);
    const second = storeReference(app, p, uploadRef());
    const third = storeReference(app, p, uploadRef());
    const secondHeld = gate();
    b.gate = secondHeld.closed;
    firstHeld.open();
    expect(await failing).toBe("401:上传者的账号已被删除");
    // The second rewrites (the first's undo removed its object); a fourth arriving now waits behind the third.
    await until(() => b.puts.length === 2);
    const fourth = storeReference(app, p, uploadRef());
    for (let i = 0; i < 20; i++) await turn();
    await Bun.sleep(10);
    expect(b.puts.length).toBe(2);
    secondHeld.open();
    await Promise.all([second, third, fourth]);
    // The third and fourth find the second's copy in service and write nothing.
    expect(b.puts).toEqual([blob.storage_key, blob.storage_key]);
    expect(b.objects.has(blob.storage_key)).toBe(true);
    expect(blobOf(p.sha256)!.ref_count).toBe(4);
    expect(replicaState(blob.id, b)).toBe("done");
  });
});

describe("the uploader and the alias", () => {
  test("an uploader with no account row is refused as deleted, not with a crash", async () => {
    expect(await storeOutcome(storeReference(app, preparedUpload(), uploadRef({ userId: "ghost" })))).toBe("401:上传者的账号已被删除");
    expect(a.deletes).toEqual(a.puts);
  });

  test("moving an alias tells the lookups' watchers (the delivery threads, the warm answers)", async () => {
    const told: unknown[] = [];
    app.lookups.watch((change) => told.push(change));
    await storeReference(app, preparedUpload(), uploadRef({ objectKey: "w/1.png" }));
    expect(told).toContainEqual({ alias: ["default", "w/1.png"] });
  });
});

test("start-up recovery drops the cached variants of bytes no blob holds, and only those", async () => {
  const p = preparedUpload();
  await storeReference(app, p, uploadRef());
  const owned = blobOf(p.sha256)!.storage_key;
  const lost = preparedUpload();
  const orphanOfLost = storageKeyFor(lost.sha256, "png");
  const loserOfOwned = storageKeyFor(p.sha256, "png"); // a concurrent upload's key: its bytes have a blob
  const add = (key: string) => app.db.query("INSERT INTO upload_intents (channel_id, storage_key, created_at) VALUES (?, ?, ?)").run(b.row.id, key, sqlTime());
  for (const key of [owned, orphanOfLost, loserOfOwned, "img/not-a-storage-key"]) add(key);
  const dropped: (string | undefined)[] = [];
  const before = app.variants.onBlobDropped;
  app.variants.onBlobDropped = (sha256) => dropped.push(sha256);
  try {
    await resolveUploadIntents(app);
  } finally {
    app.variants.onBlobDropped = before;
  }
  expect(dropped).toStrictEqual([lost.sha256]);
  expect(b.deletes.sort()).toEqual([owned, orphanOfLost, loserOfOwned, "img/not-a-storage-key"].sort());
  expect(intents()).toBe(0);
});
