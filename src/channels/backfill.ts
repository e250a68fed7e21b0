/**
 * A new channel must receive every existing image (spec 3.2). The pending
 * replica rows are written in one statement at creation, so the counters are
 * right at once; the per-blob replication jobs are enqueued by a background job
 * in batches, so a large library never holds up the create request.
 */
import type { AppContext } from "../context";
import { REPLICATE_JOB } from "../images/store";
import type { JobContext } from "../jobs/queue";
import { inWriteTransaction } from "../db/write-transaction";

export const BACKFILL_JOB = "channel.backfill";
const BATCH = 500;

/** Marks every live blob pending on the channel and wakes the backfill job. */
export function startBackfill(app: AppContext, channelId: number) {
  inWriteTransaction(app.db, () => {
    app.images.addPendingReplicasForAll(channelId);
    app.jobs.enqueue(BACKFILL_JOB, { channel_id: channelId }, { uniqueKey: String(channelId) });
  });
}

/**
 * Queues the channel's unfinished replicas again, off the request and the loop (the backfill job
 * enqueues them in batches with turns of the loop between): enqueueing a million rows in place
 * froze the loop for minutes when a channel recovered or was moved.
 */
export function requeueUnfinished(app: AppContext, channelId: number) {
  app.jobs.enqueue(BACKFILL_JOB, { channel_id: channelId, expedite: true }, { uniqueKey: `${channelId}:requeue` });
}

/** Enqueues a replication job for each replica of the channel that is not done yet, in id order. */
export async function runBackfill(app: AppContext, { channel_id, expedite = false }: { channel_id: number; expedite?: boolean }, ctx: JobContext) {
  let after = 0;
  for (;;) {
    const channel = app.channels.get(channel_id);
    if (!channel || channel.row.deleting) return;
    const ids = app.images.unfinishedReplicaBatch(channel_id, after, BATCH);
    if (ids.length === 0) return;
    inWriteTransaction(app.db, () => {
      for (const blobId of ids) {
        app.jobs.enqueue(REPLICATE_JOB, { blob_id: blobId, channel_id }, { uniqueKey: `${blobId}:${channel_id}`, expedite });
      }
    });
    after = ids.at(-1)!;
    ctx.heartbeat();
    // Let requests run between batches.
    await Bun.sleep(0);
  }
}
