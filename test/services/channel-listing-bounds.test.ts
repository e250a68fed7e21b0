/**
 * What the purge drain and the reconciliation keep in memory while they list a channel
 * (channel audit M1): a peer may list without end (fresh keys, fresh tokens), so neither may
 * hold every listed key. In-process over the real context; the channel's driver is replaced
 * by a listing the test controls.
 */
import { expect, test } from "bun:test";
import { DRAIN_BATCH, SYSTEM_OBJECT_LIMIT, deleteChannel, runDrain } from "../../src/channels/drain";
import type { Driver, ObjectInfo } from "../../src/channels/driver";
import { reconcileChannel } from "../../src/channels/reconcile";
import type { AppContext } from "../../src/context";
import { serviceContextPerTest, thrown } from "./harness";

let app: AppContext;
serviceContextPerTest((ctx) => ({ app } = ctx));

const jobCtx = () => ({ id: 1, kind: "channel.drain", attempt: 1, maxAttempts: 10, signal: new AbortController().signal, heartbeat: () => true });

/** A channel whose objects live in `store`; `listed` counts entries handed out before the first delete. */
function fakeChannel(store: Set<string>, opts: { deletes?: boolean } = {}) {
  const channel = app.channels.list().find((c) => c.row.name === "local")!;
  const driver = channel.driver as Driver;
  const seen = { lists: 0, listedBeforeFirstDelete: 0, deleted: 0 };
  driver.list = async function* (prefix: string): AsyncIterable<ObjectInfo> {
    // A driver that lists forever would hang an unguarded drain: stop it after a few rounds.
    if (++seen.lists > 6) throw new Error("测试：列表次数过多");
    for (const key of [...store]) {
      if (!key.startsWith(prefix)) continue;
      if (seen.deleted === 0) seen.listedBeforeFirstDelete++;
      yield { key, size: 1 };
    }
  };
  driver.delete = async (key: string) => {
    seen.deleted++;
    if (opts.deletes !== false) store.delete(key);
  };
  return { channel, seen };
}

test("the drain deletes in rounds of DRAIN_BATCH keys instead of first collecting the whole listing", async () => {
  const total = 2 * DRAIN_BATCH + 500;
  const store = new Set(Array.from({ length: total }, (_, i) => `_kura/bulk/${i}`));
  const { channel, seen } = fakeChannel(store);
  deleteChannel(app, { id: "default", name: "admin" }, channel.row.id, true);
  await runDrain(app, { channel_id: channel.row.id }, jobCtx());
  expect(store.size).toBe(0);
  expect(seen.deleted).toBe(total);
  expect(seen.listedBeforeFirstDelete).toBe(DRAIN_BATCH);
  expect(app.channels.repo.byId(channel.row.id)).toBeUndefined();
});

test("a peer that lists keys again after their delete succeeded fails the drain instead of looping", async () => {
  const store = new Set(Array.from({ length: DRAIN_BATCH + 1 }, (_, i) => `_kura/bulk/${i}`));
  const { channel } = fakeChannel(store, { deletes: false });
  deleteChannel(app, { id: "default", name: "admin" }, channel.row.id, true);
  const err = (await thrown(() => runDrain(app, { channel_id: channel.row.id }, jobCtx()))) as Error;
  expect(err.message).toBe("列出对象失败：已删除的对象仍出现在列表中");
  expect(drainAlert()).toBe("存储渠道 local 清空失败：列出对象失败：已删除的对象仍出现在列表中");
  expect(app.channels.repo.byId(channel.row.id)?.deleting).toBeTruthy();
});

/** The open drain_failed alert's message, if any. */
function drainAlert(): string | undefined {
  return app.db.query<{ message: string }, []>("SELECT message FROM alerts WHERE kind = 'drain_failed' AND resolved_at = ''").get()?.message;
}

test("a peer that lists fresh system keys without end: the drain stops after SYSTEM_OBJECT_LIMIT deletes", async () => {
  const channel = app.channels.list().find((c) => c.row.name === "local")!;
  const driver = channel.driver as Driver;
  let lists = 0;
  let fresh = 0;
  let deleted = 0;
  driver.list = async function* (prefix: string): AsyncIterable<ObjectInfo> {
    if (++lists > 30) throw new Error("测试：列表次数过多");
    // Every round a new page of keys nobody listed before, as if the deletes made room for more.
    if (prefix === "_kura/") for (;;) yield { key: `_kura/spawn/${fresh++}`, size: 1 };
  };
  driver.delete = async () => {
    deleted++;
  };
  deleteChannel(app, { id: "default", name: "admin" }, channel.row.id, true);
  const err = (await thrown(() => runDrain(app, { channel_id: channel.row.id }, jobCtx()))) as Error;
  const reason = `列出对象失败：列表中的对象多于本服务可能写入的数量（${SYSTEM_OBJECT_LIMIT}），列表可能有误`;
  expect(err.message).toBe(reason);
  expect(deleted).toBe(SYSTEM_OBJECT_LIMIT);
  expect(drainAlert()).toBe(`存储渠道 local 清空失败：${reason}`);
  expect(app.channels.repo.byId(channel.row.id)?.deleting).toBeTruthy();
});

test("a listing that names our few image keys over and over fails before deleting more keys than there are blobs", async () => {
  const channel = app.channels.list().find((c) => c.row.name === "local")!;
  const insert = app.db.query<{ id: number }, [string, string]>(
    "INSERT INTO blobs (sha256, storage_key, mime, size, width, height, created_at) VALUES (?, ?, 'image/png', 1, 1, 1, '2026-01-01 00:00:00') RETURNING id",
  );
  const keys = ["a", "b"].map((c) => {
    const sha = c.repeat(64);
    const key = `img/${sha.slice(0, 2)}/${sha.slice(2, 4)}/${sha}-00000001.png`;
    insert.get(sha, key);
    return key;
  });
  const driver = channel.driver as Driver;
  let deleted = 0;
  driver.list = async function* (prefix: string): AsyncIterable<ObjectInfo> {
    // One page of 150,000 entries naming the same two objects: a peer repeating itself.
    if (prefix === "img/") for (let i = 0; i < 150_000; i++) yield { key: keys[i % 2]!, size: 1 };
  };
  driver.delete = async () => {
    deleted++;
  };
  deleteChannel(app, { id: "default", name: "admin" }, channel.row.id, true);
  const err = (await thrown(() => runDrain(app, { channel_id: channel.row.id }, jobCtx()))) as Error;
  const bound = app.db.query<{ n: number }, []>("SELECT max(id) AS n FROM blobs").get()!.n;
  expect(err.message).toBe(`列出对象失败：列表中的对象多于本服务可能写入的数量（${bound}），列表可能有误`);
  expect(deleted).toBe(0);
  expect(app.channels.repo.byId(channel.row.id)?.deleting).toBeTruthy();
});

test("reconciliation keeps no listed key it has no use for: the heap does not grow with the listing", async () => {
  const channel = app.channels.list().find((c) => c.row.name === "local")!;
  const count = 150_000;
  const pad = "f".repeat(1000);
  let grownBy = 0;
  const driver = channel.driver as Driver;
  driver.list = async function* (): AsyncIterable<ObjectInfo> {
    Bun.gc(true);
    const before = process.memoryUsage().heapUsed;
    // Foreign keys, each a fresh ~1 KB string: 150 MB if all were kept.
    for (let i = 0; i < count; i++) yield { key: `other/${i}/${pad}`, size: 1 };
    Bun.gc(true);
    grownBy = process.memoryUsage().heapUsed - before;
  };
  const result = await reconcileChannel(app, channel);
  expect(result).toMatchObject({ objects: count, foreign: count, orphans_deleted: 0, phantoms_requeued: 0 });
  expect(grownBy).toBeLessThan(50 * 1024 * 1024);
});
