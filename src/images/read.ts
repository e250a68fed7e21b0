import { ObjectNotFoundError, type ByteRange, type GetResult } from "../channels/driver";
import type { ChannelRegistry } from "../channels/registry";
import type { JobKinds } from "../jobs/kinds";
import type { JobQueue } from "../jobs/queue";
import type { Logger } from "../ops/log";
import { REPLICATE_JOB } from "./job-names";
import type { BlobRow, ImageRepo } from "./repo";

/** What reading a blob needs: replica records, the live channels, the queue for read repair, a log. */
export interface BlobReadDeps {
  images: ImageRepo;
  channels: ChannelRegistry;
  jobs: JobQueue<JobKinds>;
  log: Logger;
}

export class NoReadableChannelError extends Error {
  constructor() {
    super("没有可读取该图片的健康存储渠道");
  }
}

/** Channels holding a completed replica: healthy ones first, each group by priority. */
export function readCandidates(app: BlobReadDeps, blobId: number) {
  const done = new Set(app.images.doneChannelIds(blobId));
  const holders = app.channels.list().filter((c) => c.driver && done.has(c.row.id));
  return [...holders.filter((c) => c.healthy), ...holders.filter((c) => !c.healthy)];
}

/** Opens the blob's bytes from the best channel, failing over to the next on any error. */
export async function openBlob(app: BlobReadDeps, blob: Pick<BlobRow, "id" | "storage_key">, range?: ByteRange): Promise<GetResult & { channelId: number }> {
  for (const channel of readCandidates(app, blob.id)) {
    const result = await openOn(app, channel, blob, range);
    if (result) return { ...result, channelId: channel.row.id };
  }
  throw new NoReadableChannelError();
}

/**
 * Opens the blob and hands it to `consume` (which reads the body to the end), failing over to
 * the next channel when the open fails or the body breaks off mid-way (a peer that stalls or
 * drops the connection after its headers). For reads that finish before anything is answered:
 * small originals kept in memory, render sources.
 */
export async function readBlob<T>(app: BlobReadDeps, blob: Pick<BlobRow, "id" | "storage_key">, consume: (got: GetResult) => Promise<T>): Promise<T> {
  for (const channel of readCandidates(app, blob.id)) {
    const result = await openOn(app, channel, blob);
    if (!result) continue;
    try {
      return await consume(result);
    } catch (err) {
      app.log.warn("从存储渠道读取中断，切换到下一个", { channel: channel.row.name, blob: blob.id, err: (err as Error).message });
    }
  }
  throw new NoReadableChannelError();
}

/** The blob opened on one channel, or undefined after logging why not (and repairing a missing replica). */
async function openOn(
  app: BlobReadDeps,
  channel: ReturnType<typeof readCandidates>[number],
  blob: Pick<BlobRow, "id" | "storage_key">,
  range?: ByteRange,
): Promise<GetResult | undefined> {
  try {
    return await channel.driver!.get(blob.storage_key, range);
  } catch (err) {
    app.log.warn("从存储渠道读取失败，切换到下一个", { channel: channel.row.name, blob: blob.id, err: (err as Error).message });
    // A draining channel loses its objects on purpose.
    if (err instanceof ObjectNotFoundError && !channel.row.deleting) repairMissingReplica(app, blob.id, channel.row.id);
    return undefined;
  }
}

/**
 * Read repair: the channel answered that a replica recorded as done does not exist. It is
 * marked failed (the image detail and the channel's replica counts show it at once, and
 * reads stop trying it) and re-replicated now, instead of at the next daily reconciliation.
 */
function repairMissingReplica(app: BlobReadDeps, blobId: number, channelId: number) {
  app.images.setReplica(blobId, channelId, "failed", "读取时发现对象缺失，正在重新复制");
  app.jobs.enqueue(REPLICATE_JOB, { blob_id: blobId, channel_id: channelId }, { uniqueKey: `${blobId}:${channelId}`, expedite: true });
  app.log.warn("副本对象缺失，已标记失败并重新复制", { channel_id: channelId, blob: blobId });
}
