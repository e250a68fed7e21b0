/**
 * What the purge drain and the reconciliation keep in memory while they list a channel
 * (channel audit M1): a peer may list without end (fresh keys, fresh tokens), so neither may
 * hold every listed key. In-process over the real context; the channel's driver is replaced
 * by a listing the test controls.
 */
import { afterEach, beforeEach, expect, test } from "bun:test";
import { DRAIN_BATCH, deleteChannel, runDrain } from "../../src/channels/drain";
import type { Driver, ObjectInfo } from "../../src/channels/driver";
import { reconcileChannel } from "../../src/channels/reconcile";
import type { AppContext } from "../../src/context";
import { serviceContext, thrown } from "./harness";

let app: AppContext;
let dispose: () => void;
beforeEach(async () => {
  ({ app, dispose } = await serviceContext());
});
afterEach(() => dispose());

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
  const alert = app.db.query<{ message: string }, []>("SELECT message FROM alerts WHERE kind = 'drain_failed' AND resolved_at = ''").get();
  expect(alert?.message).toBe("存储渠道 local 清空失败：列出对象失败：已删除的对象仍出现在列表中");
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
