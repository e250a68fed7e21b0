import type { AppContext } from "../context";
import { parseSqlTime } from "../db/time";
import { REPLICATE_JOB } from "../images/store";
import { STORAGE_KEY_PATTERN } from "../images/storage-key";
import { intentKeysOnChannel } from "../images/repos/intents";
import { channelErrorText } from "./drivers/driver-errors";
import type { LoadedChannel } from "./registry";

/** Objects this young may belong to an upload that has not committed yet: never judged. */
const IN_FLIGHT_GRACE_MS = 60 * 60 * 1000;

export interface ReconcileResult {
  objects: number;
  bytes: number;
  foreign: number;
  orphans_deleted: number;
  phantoms_requeued: number;
  /** Failed replicas given a fresh job: the daily retry of copies whose own retries ran out. */
  failed_requeued: number;
}

/**
 * Compares one channel's listing with the database:
 * - an object in our key format with no record, written after the channel was bound to
 *   this database, is an orphan of ours and is deleted;
 * - any other record-less object (another format, or older than the binding time, e.g.
 *   from before a restore) is foreign: counted, never touched;
 * - a done replica whose object is missing is a phantom: set back to pending and re-queued;
 * - a failed replica gets a fresh job (its retries may have run out while its source was down).
 */
export async function reconcileChannel(app: AppContext, channel: LoadedChannel, now = Date.now()): Promise<ReconcileResult> {
  const driver = channel.driver;
  if (!driver) throw new Error(channel.loadError ?? "渠道未加载");
  const result: ReconcileResult = { objects: 0, bytes: 0, foreign: 0, orphans_deleted: 0, phantoms_requeued: 0, failed_requeued: 0 };
  const boundAt = parseSqlTime(channel.row.bound_at).getTime();
  const known = new Map(app.images.blobStatesOn(channel.row.id).map((r) => [r.storage_key, r]));
  const intents = new Set(intentKeysOnChannel(app.db, channel.row.id));
  // Only the replicas we expect are tracked, not every listed key: memory follows the database,
  // not what a peer lists (one that loops with fresh keys would otherwise fill it without end).
  const unseen = new Set<string>();
  for (const [key, row] of known) if (row.state === "done") unseen.add(key);
  // A listing may outlast the grace of a driver a config change replaces meanwhile: it stays open until this ends.
  const release = app.channels.hold(driver);
  try {
    for await (const object of driver.list("")) {
      result.objects++;
      result.bytes += object.size;
      unseen.delete(object.key);
      if (object.key.startsWith("_kura/") || known.has(object.key) || intents.has(object.key)) continue;
      const modified = object.modified?.getTime();
      const ours = STORAGE_KEY_PATTERN.test(object.key) && modified !== undefined && modified >= boundAt;
      if (!ours) {
        result.foreign++;
        continue;
      }
      if (now - modified < IN_FLIGHT_GRACE_MS) continue;
      await driver.delete(object.key);
      result.orphans_deleted++;
    }
  } finally {
    release();
  }
  for (const key of unseen) {
    const row = known.get(key)!;
    app.images.setReplica(row.id, channel.row.id, "pending", "对账发现对象缺失");
    app.jobs.enqueue(REPLICATE_JOB, { blob_id: row.id, channel_id: channel.row.id }, { uniqueKey: `${row.id}:${channel.row.id}` });
    result.phantoms_requeued++;
  }
  for (const row of known.values()) {
    if (row.state !== "failed") continue;
    app.jobs.enqueue(REPLICATE_JOB, { blob_id: row.id, channel_id: channel.row.id }, { uniqueKey: `${row.id}:${channel.row.id}` });
    result.failed_requeued++;
  }
  return result;
}

/** One round over every healthy, non-draining channel; logs the result line of spec 6.3. */
export async function reconcileRound(app: AppContext) {
  for (const channel of app.channels.list()) {
    if (!channel.driver || !channel.healthy || channel.row.deleting) continue;
    try {
      const r = await reconcileChannel(app, channel);
      app.log.info("每日对账完成", { channel: channel.row.name, ...r });
    } catch (err) {
      // The Chinese reason, as in last_error and alerts: a runtime's English text may describe internals.
      app.log.warn("对账失败", { channel: channel.row.name, err: channelErrorText(err) });
    }
  }
}
