/**
 * Deleting a channel (spec 3.2). Without purge the row goes at once and the
 * remote objects stay. With purge the channel is marked `deleting` (no new
 * writes) and a drain job removes exactly what this service wrote there —
 * image objects of known blobs or upload intents, and system objects under
 * `_kura/` (snapshots included) — never foreign objects. When the channel is
 * empty of ours, the row goes. Deletion failures open `drain_failed` and the
 * job retries with backoff.
 */
import { Conflict, NotFound } from "../errors";
import type { AppContext } from "../context";
import { readMeta, writeMeta } from "../db/meta";
import { sqlTime } from "../db/time";
import { sha256OfStorageKey } from "../images/storage-key";
import { REPLICATE_JOB, scheduleReplication } from "../images/store";
import { JobInterruptedError, type JobContext } from "../jobs/queue";
import { audit, type AuditActor } from "../ops/audit";
import { openAlert, resolveAlert } from "../ops/alerts";
import { BACKFILL_JOB, runBackfill } from "./backfill";
import type { Driver } from "./driver";
import { channelErrorText } from "./drivers/driver-errors";
import {
  deleteChannelRows,
  holdsSoleCopy,
  intentExists,
  intentSince,
  ourImageKeyBound,
  runningJobForChannel,
  soleCopyBlobId,
  storageKeyOfSha,
} from "./repos/drain";
import { inWriteTransaction } from "../db/write-transaction";

export const DRAIN_JOB = "channel.drain";
const SYSTEM_PREFIX = "_kura/";

/** Removes the row and everything recorded about the channel (replica rows cascade). */
function removeRow(app: AppContext, channelId: number) {
  deleteChannelRows(app.db, channelId, progressKey(channelId));
}

/** DELETE /api/admin/channels/{id}: 204 removed at once, 202 drain started. */
export function deleteChannel(app: AppContext, actor: AuditActor, id: number | undefined, purge: boolean): 202 | 204 {
  const row = id === undefined ? undefined : app.channels.repo.byId(id);
  if (!row) throw new NotFound("存储渠道不存在");
  // Checked and applied in one transaction, so no replica can become the sole copy in between.
  inWriteTransaction(app.db, () => {
    if (holdsSoleCopy(app.db, row.id)) throw new Conflict("该渠道持有部分图片的唯一副本，请先等待复制到其他渠道");
    if (purge) {
      app.channels.repo.markDeleting(row.id);
      app.jobs.enqueue(DRAIN_JOB, { channel_id: row.id }, { uniqueKey: String(row.id) });
    } else {
      removeRow(app, row.id);
    }
  });
  app.channels.reload();
  audit(app.db, actor, "channel.delete", row.id, { name: row.name, purge });
  if (!purge) app.log.info("已移除存储渠道（远端对象保留）", { channel: row.name });
  return purge ? 202 : 204;
}

const progressKey = (channelId: number) => `channel_drain:${channelId}`;

interface Progress {
  objects: number;
  system_objects: number;
}

/** Counts survive retries and restarts, so the final log line reports the whole drain. */
function loadProgress(app: AppContext, channelId: number): Progress {
  const value = readMeta(app.db, progressKey(channelId));
  return value !== undefined ? (JSON.parse(value) as Progress) : { objects: 0, system_objects: 0 };
}

function saveProgress(app: AppContext, channelId: number, progress: Progress) {
  writeMeta(app.db, progressKey(channelId), JSON.stringify(progress));
}

/** Retry later without an alert: writes that started before the channel was marked are still landing. */
class DrainBusyError extends Error {}

/** An intent older than this is a leftover of a crash whose channel could not be cleaned at startup, not a live upload. */
const LIVE_INTENT_MS = 60 * 60_000;

function writesInFlight(app: AppContext, channelId: number): boolean {
  const replicating = runningJobForChannel(app.db, REPLICATE_JOB, channelId);
  const uploading = intentSince(app.db, channelId, sqlTime(Date.now() - LIVE_INTENT_MS));
  return replicating || uploading;
}

/** An image object is ours when its key is in our format and names a blob we know (or an upload intent on this channel). */
function isOurImageObject(app: AppContext, channelId: number, key: string): boolean {
  const sha256 = sha256OfStorageKey(key);
  if (sha256 === undefined) return false;
  if (storageKeyOfSha(app.db, sha256) === key) return true;
  return intentExists(app.db, channelId, key);
}

/**
 * Whether `key` is the last completed copy of a live image (it became that after the purge was
 * accepted: another copy found damaged, say): it stays, and a copy to the channels in service is
 * queued, so the next attempt can delete it once that copy is done.
 */
function keepsLastCopy(app: AppContext, channelId: number, key: string): boolean {
  const sha256 = sha256OfStorageKey(key);
  const blobId = sha256 === undefined ? undefined : soleCopyBlobId(app.db, channelId, sha256, key);
  if (blobId === undefined) return false;
  scheduleReplication(app, blobId);
  return true;
}

class LastCopiesKept extends Error {
  constructor(count: number) {
    super(`${count} 个图片对象是唯一的完整副本，已安排复制到其他渠道，复制完成后继续清空`);
  }
}

/** Keys held in memory at once: the listing is collected in rounds of this many, each then deleted. */
export const DRAIN_BATCH = 100_000;

/**
 * System objects one drain attempt deletes at most. Kura keeps a few there (retained backups, a
 * probe a crash left behind); a peer that lists fresh `_kura/` keys round after round would
 * otherwise be deleted from for as long as it answers.
 */
export const SYSTEM_OBJECT_LIMIT = 10 * DRAIN_BATCH;

/**
 * Up to DRAIN_BATCH of our keys under `prefix`, listed before any is deleted (deleting while a
 * backend pages through a listing can skip entries); `more` when the listing went on. The next
 * round lists again from the start, without what was deleted, so memory stays bounded even when
 * a peer lists without end.
 */
async function collectBatch(app: AppContext, driver: Driver, channelId: number, prefix: string, ctx: JobContext, kept: ReadonlySet<string>) {
  const keys: string[] = [];
  let listed = 0;
  for await (const info of driver.list(prefix)) {
    if (ctx.signal.aborted) throw ctx.signal.reason ?? new JobInterruptedError("shutdown");
    // A long listing is progress too: without this the lease of a large drain lapses mid-list.
    if (++listed % 1000 === 0) ctx.heartbeat();
    if (kept.has(info.key)) continue; // a last copy this attempt keeps (keepsLastCopy)
    if (prefix === SYSTEM_PREFIX || isOurImageObject(app, channelId, info.key)) keys.push(info.key);
    if (keys.length >= DRAIN_BATCH) return { keys, more: true };
  }
  return { keys, more: false };
}

export async function runDrain(app: AppContext, { channel_id }: { channel_id: number }, ctx: JobContext) {
  const loaded = app.channels.get(channel_id);
  const row = app.channels.repo.byId(channel_id);
  if (!row?.deleting) return;
  if (writesInFlight(app, channel_id)) throw new DrainBusyError("存储渠道仍有进行中的写入，稍后继续清空");

  let driver: Driver | undefined = loaded?.driver;
  if (!driver) driver = (await app.channels.probe(channel_id))?.driver;
  const fail = (reason: string) => {
    openAlert(app, "drain_failed", row.name, `存储渠道 ${row.name} 清空失败：${reason}`);
  };
  if (!driver) {
    const reason = app.channels.repo.byId(channel_id)?.last_error || "渠道无法加载";
    fail(reason);
    throw new Error(reason);
  }

  const progress = loadProgress(app, channel_id);
  /** Last copies this attempt keeps: left out of every later round (they are listed again). */
  const kept = new Set<string>();
  let failures = 0;
  let firstError = "";
  const remove = async (key: string, counter: keyof Progress) => {
    if (ctx.signal.aborted) throw ctx.signal.reason ?? new JobInterruptedError("shutdown");
    try {
      await driver!.delete(key);
      progress[counter]++;
    } catch (err) {
      if (ctx.signal.aborted) throw ctx.signal.reason ?? err;
      failures++;
      firstError ||= `删除对象失败：${channelErrorText(err)}`;
      if (failures === 1) fail(firstError);
    }
    if ((progress.objects + progress.system_objects + failures) % 100 === 0) {
      ctx.heartbeat();
      saveProgress(app, channel_id, progress);
    }
  };

  try {
    // A round never deletes more than could be ours: a peer whose listing does not shrink as we
    // delete (fresh keys without end, or deleted keys listed again a round later) fails the drain.
    const limits = { objects: ourImageKeyBound(app.db, channel_id), system_objects: SYSTEM_OBJECT_LIMIT };
    for (const [prefix, counter] of [
      ["img/", "objects"],
      [SYSTEM_PREFIX, "system_objects"],
    ] as const) {
      let previous = new Set<string>();
      let deleted = 0;
      for (;;) {
        const { keys, more } = await collectBatch(app, driver, channel_id, prefix, ctx, kept);
        // A key that is listed again after its delete succeeded: the peer claims deletes it does not
        // do (or lists what is gone), and another round would delete the same keys forever.
        if (keys.some((key) => previous.has(key))) throw new Error("已删除的对象仍出现在列表中");
        const removed: string[] = [];
        for (const key of keys) {
          if (counter === "objects" && keepsLastCopy(app, channel_id, key)) kept.add(key);
          else removed.push(key);
        }
        deleted += removed.length;
        if (deleted > limits[counter]) throw new Error(`列表中的对象多于本服务可能写入的数量（${limits[counter]}），列表可能有误`);
        for (const key of removed) await remove(key, counter);
        // A batch's worth kept: nothing more to learn this attempt, the copies come first.
        if (!more || failures > 0 || kept.size >= DRAIN_BATCH) break;
        previous = new Set(removed);
      }
    }
    if (kept.size > 0) throw new LastCopiesKept(kept.size);
  } catch (err) {
    saveProgress(app, channel_id, progress);
    if (err instanceof JobInterruptedError || ctx.signal.aborted) throw err;
    if (err instanceof LastCopiesKept) {
      fail(err.message);
      throw err;
    }
    // A listing that fails means nothing can be deleted: a drain failure like any other.
    const reason = `列出对象失败：${channelErrorText(err)}`;
    fail(reason);
    throw new Error(reason);
  }
  saveProgress(app, channel_id, progress);
  if (failures > 0) throw new Error(`${failures} 个对象删除失败，稍后重试：${firstError}`);

  const removed = inWriteTransaction(app.db, () => {
    if (writesInFlight(app, channel_id)) return false;
    removeRow(app, channel_id);
    return true;
  });
  if (!removed) throw new DrainBusyError("存储渠道仍有进行中的写入，稍后继续清空");
  app.channels.reload();
  resolveAlert(app, "drain_failed", row.name);
  await driver.close?.().catch(() => {});
  app.log.info("存储渠道已清空并移除", { channel: row.name, objects: progress.objects, system_objects: progress.system_objects });
}

/** The background jobs of channel administration: backfill of a new channel and drain of a deleted one. */
export function registerChannelJobs(app: AppContext) {
  app.jobs.register(BACKFILL_JOB, (payload, ctx) => runBackfill(app, payload, ctx), { concurrency: 1 });
  app.jobs.register(DRAIN_JOB, (payload, ctx) => runDrain(app, payload, ctx), {
    concurrency: 1,
    // Draining retries until the channel is empty; the backoff keeps a dead backend from being hammered.
    maxAttempts: 100_000,
    backoff: { baseMs: 2_000, capMs: 10 * 60_000 },
    leaseMs: 5 * 60_000,
  });
}
