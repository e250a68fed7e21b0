import type { AppContext } from "../context";
import { sqlTime } from "../db/time";
import type { JobKinds } from "../jobs/kinds";
import { PermanentJobError } from "../jobs/queue";
import { channelErrorText } from "../channels/drivers/driver-errors";
import type { Driver } from "../channels/driver";
import type { LoadedChannel } from "../channels/registry";
import type { BlobRow } from "./repo";
import { holdsIntactCopy, NoReadableChannelError, openBlob } from "./read";
import { ContentMismatchError } from "./verify";
import { perceptualHash, phashToHex } from "./phash";
import { PHASH_JOB, REPLICATE_JOB } from "./store";
import { holdAt, pauseAt } from "../testing/hold-points";
import { deleteIntent, insertIntent } from "./repos/intents";

export { BLOB_DELETE_JOB } from "./job-names";
import { BLOB_DELETE_JOB } from "./job-names";
import { inWriteTransaction } from "../db/write-transaction";

type ReplicatePayload = JobKinds["blob.replicate"];

/** Copies a blob to one more channel; failures are recorded on the replica and retried with backoff. */
async function replicate(app: AppContext, { blob_id, channel_id }: ReplicatePayload) {
  const blob = app.images.blob(blob_id);
  const target = app.channels.get(channel_id);
  if (!blob || blob.pending_delete || !target || target.row.deleting) return;
  if (app.images.replicas(blob_id).some((r) => r.channel_id === channel_id && r.state === "done")) return;
  if (!target.driver || !target.healthy) {
    const reason = target.row.last_error || "存储渠道不健康";
    app.images.setReplica(blob_id, channel_id, "failed", reason, true);
    throw new Error(reason);
  }
  try {
    const source = await openSource(app, blob, channel_id, target.driver);
    if (!source) {
      if (reconfiguredSince(app, target, blob_id)) return;
      app.images.setReplica(blob_id, channel_id, "done", "", true);
      app.log.info("渠道上的对象完好，副本已恢复", { channel: target.row.name, blob: blob_id });
      return;
    }
    await holdAt("replicate.before-put", `key=${blob.storage_key} channel=${channel_id}`);
    await pauseAt("replicate.put", `key=${blob.storage_key} channel=${channel_id}`);
    // The source stream is checked against the blob's SHA-256 (read.ts): wrong bytes fail the
    // put before their last chunk. A driver that stops reading at `size` would not see that
    // error, so the copy counts only once the whole body passed the check.
    await app.channels.put({ ...target, driver: target.driver }, blob.storage_key, source.stream, blob.size);
    if (!source.verified()) throw new ContentMismatchError();
    if (channelGone(app, channel_id)) return;
    if (!app.images.blob(blob_id)) {
      // Physically deleted while the copy was on its way (its delete job could not see this object
      // yet): nothing will ever name it, so it goes now instead of at the next reconciliation.
      await target.driver.delete(blob.storage_key).catch(() => {});
      return;
    }
    if (reconfiguredSince(app, target, blob_id)) return;
    app.images.setReplica(blob_id, channel_id, "done", "", true);
  } catch (err) {
    if (channelGone(app, channel_id)) return;
    // The same Chinese text for the replica, the job's record and its log line.
    const reason = channelErrorText(err);
    app.images.setReplica(blob_id, channel_id, "failed", reason, true);
    throw reason === (err as Error)?.message ? err : new Error(reason, { cause: err });
  }
}

/**
 * Where the copy comes from, or undefined when no completed copy is readable but the target
 * itself holds the blob's exact bytes (its copy was recorded failed while it could not be read:
 * an unmounted disk); then nothing needs copying, and without this the image stayed unreadable.
 */
async function openSource(app: AppContext, blob: BlobRow, targetId: number, target: Driver) {
  try {
    return await openBlob(app, blob, undefined, targetId);
  } catch (err) {
    if (err instanceof NoReadableChannelError && (await holdsIntactCopy(target, blob))) return undefined;
    throw err;
  }
}

/**
 * True (and the copy queued again) when the channel's configuration changed while this copy was
 * on its way: it went to the place the channel pointed at before, perhaps no longer its place, so
 * it must not be recorded done (a move set the channel's copies back to pending for that reason).
 */
function reconfiguredSince(app: AppContext, target: LoadedChannel, blobId: number): boolean {
  if (app.channels.repo.byId(target.row.id)?.config_sealed === target.row.config_sealed) return false;
  app.jobs.enqueue(REPLICATE_JOB, { blob_id: blobId, channel_id: target.row.id }, { uniqueKey: `${blobId}:${target.row.id}:again` });
  return true;
}

/**
 * The target channel was removed (purge=false) while its copy was in flight: there is no
 * replica to record any more (its row went with the channel), so the job ends quietly.
 */
function channelGone(app: AppContext, channelId: number): boolean {
  if (app.channels.repo.byId(channelId)) return false;
  app.log.info("存储渠道已删除，复制任务结束", { channel_id: channelId });
  return true;
}

/**
 * Physically removes a blob whose reference count stayed zero through the grace period.
 * The row goes first (in a transaction that re-checks the count), then the objects, so an
 * upload of the same content afterwards creates a fresh blob with a fresh key. Until its delete
 * was tried, each object is named by an intent row written with the claim: a crash in between
 * leaves them to the next start (resolveUploadIntents deletes what no blob owns, and the blob's
 * cached variants with it), where nothing else would name them any more.
 */
async function deleteBlob(app: AppContext, { blob_id }: { blob_id: number }) {
  const claimed = inWriteTransaction(app.db, () => {
    const blob = app.images.blob(blob_id);
    if (!blob || blob.ref_count > 0 || !blob.pending_delete) return undefined;
    if (blob.delete_after && blob.delete_after > sqlTime()) throw new Error("宽限期未到");
    const now = sqlTime();
    const objects = app.images.replicas(blob_id).map((r) => ({ channelId: r.channel_id, intent: insertIntent(app.db, r.channel_id, blob.storage_key, now) }));
    app.images.deleteBlobRow(blob_id);
    return { blob, objects };
  });
  if (!claimed) return;
  await holdAt("blob.after-claim", `key=${claimed.blob.storage_key}`);
  await app.variants.dropBlob(claimed.blob.sha256);
  const failures: string[] = [];
  for (const { channelId, intent } of claimed.objects) {
    const channel = app.channels.get(channelId);
    try {
      await channel?.driver?.delete(claimed.blob.storage_key);
    } catch (err) {
      failures.push(`${channel?.row.name}: ${(err as Error).message}`);
    }
    // Tried: a failure is the reconciliation's, as before (an intent would hide the key from it).
    deleteIntent(app.db, intent);
  }
  // Left-over objects are orphans now; daily reconciliation removes them.
  if (failures.length) app.log.warn("删除图片对象失败，将由对账清理", { blob: blob_id, err: failures.join("; ") });
}

/** The 64-bit perceptual hash for similar-image detection, off the upload's critical path. */
export async function computePhash(app: AppContext, { blob_id }: { blob_id: number }) {
  const blob = app.images.blob(blob_id);
  if (!blob || blob.phash) return;
  const source = await openBlob(app, blob);
  const bytes = Buffer.from(await new Response(source.stream).arrayBuffer());
  let hash: string;
  try {
    hash = phashToHex(await perceptualHash(bytes));
  } catch (err) {
    // Undecodable pixels (e.g. a truncated file) can never be hashed: do not retry.
    throw new PermanentJobError(`无法计算感知哈希: ${(err as Error).message}`);
  }
  app.images.setPhash(blob_id, hash);
}

export function registerImageJobs(app: AppContext) {
  // New blobs are hashed by the sweep (phash-sweep.ts); this runs jobs queued by earlier versions.
  app.jobs.register(PHASH_JOB, (payload) => computePhash(app, payload), { concurrency: 1 });
  app.jobs.register(REPLICATE_JOB, (payload) => replicate(app, payload), { concurrency: 4 });
  app.jobs.register(BLOB_DELETE_JOB, (payload) => deleteBlob(app, payload), { concurrency: 2 });
}
