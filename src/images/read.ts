import { HeldBackLog } from "../ops/held-back-log";
import { getOrCreate } from "../shared/get-or-create";
import { ObjectNotFoundError, type ByteRange, type Driver, type GetResult } from "../channels/driver";
import { isOutOfFileDescriptors, Unavailable } from "../errors";
import type { ChannelRegistry } from "../channels/registry";
import type { JobKinds } from "../jobs/kinds";
import type { JobQueue } from "../jobs/queue";
import type { Logger } from "../ops/log";
import { channelErrorText } from "../channels/drivers/driver-errors";
import { exactLengthStream } from "../channels/drivers/sized-body";
import { REPLICATE_JOB } from "./job-names";
import type { BlobRow, ImageRepo } from "./repo";
import { sha256OfStorageKey } from "./storage-key";
import { ContentMismatchError, verifiedStream } from "./verify";

/** What reading a blob needs: replica records, the live channels, the queue for read repair, a log. */
export interface BlobReadDeps {
  images: ImageRepo;
  channels: ChannelRegistry;
  jobs: JobQueue<JobKinds>;
  log: Logger;
}

/**
 * No channel could give the blob: a dependency that cannot serve now (every surface answers a
 * 503: delivery's text, the APIs' JSON, S3's ServiceUnavailable), not a crash.
 */
export class NoReadableChannelError extends Unavailable {
  constructor() {
    super("没有可读取该图片的健康存储渠道");
    this.name = "NoReadableChannelError";
  }
}

/** A read failure that is the server's rather than the channel's: out of file descriptors. */
const descriptorFault = (err: unknown) => (isOutOfFileDescriptors(err) ? err : undefined);

/**
 * Why no channel gave the blob: the server's own trouble when that kept a channel from being
 * read (every surface answers it as such: a retryable 503 naming the descriptor limit, instead
 * of blaming the channels), else NoReadableChannelError.
 */
const unreadable = (serverFault: unknown) => (serverFault === undefined ? new NoReadableChannelError() : serverFault);

/** Channels holding a completed replica: healthy ones first, each group by priority. */
export function readCandidates(app: BlobReadDeps, blobId: number) {
  const done = new Set(app.images.doneChannelIds(blobId));
  const holders = app.channels.list().filter((c) => c.driver && done.has(c.row.id));
  return [...holders.filter((c) => c.healthy), ...holders.filter((c) => !c.healthy)];
}

/**
 * Where a read tries, in order: the channels with a completed copy (readCandidates), then, only
 * once those all failed, the healthy channels whose copy is not (yet) recorded done: a channel
 * whose location was just changed holds `pending` copies it may well have (the files moved with
 * it), and one recorded failed while unreadable may have its object back. A whole read is checked
 * against the SHA-256 either way. `except`: a channel never to read from (a copy's own target).
 */
function* readOrder(
  app: BlobReadDeps,
  blobId: number,
  except?: number,
  whole = true,
): Generator<{ channel: ReturnType<typeof readCandidates>[number]; lastResort: boolean }> {
  for (const channel of readCandidates(app, blobId)) if (channel.row.id !== except) yield { channel, lastResort: false };
  // Only a whole read is checked against the SHA-256: a range from an unconfirmed copy (one found
  // corrupt, say) would be served as the image, cacheable for a year.
  if (!whole) return;
  const unfinished = new Set(
    app.images
      .replicas(blobId)
      .filter((r) => r.state !== "done")
      .map((r) => r.channel_id),
  );
  for (const channel of app.channels.list()) {
    if (unfinished.has(channel.row.id) && channel.driver && channel.healthy && !channel.row.deleting && channel.row.id !== except)
      yield { channel, lastResort: true };
  }
}

/** A blob to read: its SHA-256, when the caller does not pass it, comes from the key (which embeds it). */
export type BlobRef = Pick<BlobRow, "id" | "storage_key"> & { sha256?: string };

/**
 * An opened blob. A whole read's `stream` is checked against the blob's SHA-256 as it passes
 * (verify.ts: wrong bytes end in an error before their last chunk), a range's against its
 * length only; `verified()` tells a writer that the whole blob passed and matched. `file`,
 * a local-disk channel's own file sent by sendfile, is not checked (README, "Public delivery").
 */
export type OpenedBlob = GetResult & { channelId: number; verified(): boolean };

/** Opens the blob's bytes from the best channel, failing over to the next on any error. */
export async function openBlob(app: BlobReadDeps, blob: BlobRef, range?: ByteRange, except?: number): Promise<OpenedBlob> {
  let serverFault: unknown;
  for (const { channel, lastResort } of readOrder(app, blob.id, except, range === undefined)) {
    const result = await openOn(app, channel, blob, range, !lastResort);
    if (!("failed" in result)) return { ...result, channelId: channel.row.id };
    serverFault ??= descriptorFault(result.failed);
  }
  throw unreadable(serverFault);
}

/**
 * True when `driver` holds the blob's exact bytes under its key (read whole and hashed). For a
 * copy recorded failed with nothing left to copy from: a disk that was unmounted, or a peer that
 * answered 404 for a while, still has the object, and only reading it can say it is intact.
 */
export async function holdsIntactCopy(driver: Driver, blob: BlobRef & { size: number }): Promise<boolean> {
  let got: GetResult;
  try {
    got = await driver.get(blob.storage_key);
  } catch (err) {
    if (err instanceof ObjectNotFoundError) return false;
    throw err;
  }
  // Another size is another object: no need to read it to say so.
  if (got.size !== blob.size) {
    await got.stream.cancel().catch(() => {});
    return false;
  }
  const hasher = new Bun.CryptoHasher("sha256");
  let size = 0;
  for await (const chunk of got.stream) {
    hasher.update(chunk);
    size += chunk.byteLength;
  }
  return size === blob.size && hasher.digest("hex") === (blob.sha256 ?? sha256OfStorageKey(blob.storage_key));
}

/**
 * Opens the blob and hands it to `consume` (which reads the body to the end), failing over to
 * the next channel when the open fails or the body breaks off mid-way (a peer that stalls or
 * drops the connection after its headers). For reads that finish before anything is answered:
 * small originals kept in memory, render sources.
 */
export async function readBlob<T>(app: BlobReadDeps, blob: BlobRef, consume: (got: GetResult) => Promise<T>): Promise<T> {
  let serverFault: unknown;
  for (const { channel, lastResort } of readOrder(app, blob.id)) {
    const result = await openOn(app, channel, blob, undefined, !lastResort);
    if ("failed" in result) {
      serverFault ??= descriptorFault(result.failed);
      continue;
    }
    try {
      return await consume(result);
    } catch (err) {
      serverFault ??= descriptorFault(err);
      app.channels.countRead(channel.row.id, "error");
      const what = err instanceof ContentMismatchError ? "从存储渠道读到的数据校验失败，切换到下一个" : "从存储渠道读取中断，切换到下一个";
      logFailover(app, what, channel.row.name, blob.id, err);
    }
  }
  throw unreadable(serverFault);
}

/**
 * The blob opened on one channel, its stream checked (see OpenedBlob), or why not after
 * logging it (and repairing a missing replica).
 */
async function openOn(
  app: BlobReadDeps,
  channel: ReturnType<typeof readCandidates>[number],
  blob: BlobRef,
  range?: ByteRange,
  repair = true,
): Promise<(GetResult & { verified(): boolean }) | { failed: unknown }> {
  try {
    const got = await channel.driver!.get(blob.storage_key, range);
    app.channels.countRead(channel.row.id, "ok");
    const sha256 = blob.sha256 ?? sha256OfStorageKey(blob.storage_key);
    if (range || !sha256) return { ...got, stream: exactLengthStream(got.stream, got.size, channel.row.name), verified: () => false };
    const read = verifiedStream(got.stream, sha256, got.size, () => repair && repairCorruptReplica(app, blob.id, channel.row.id));
    // An unconfirmed copy goes out only through the checked stream, never as a file sent unread.
    if (!repair) return { stream: read.stream, size: got.size, totalSize: got.totalSize, verified: read.verified };
    return { ...got, stream: read.stream, verified: read.verified };
  } catch (err) {
    app.channels.countRead(channel.row.id, "error");
    logFailover(app, "从存储渠道读取失败，切换到下一个", channel.row.name, blob.id, err);
    // A draining channel loses its objects on purpose; a copy not recorded done has nothing to repair.
    if (repair && err instanceof ObjectNotFoundError && !channel.row.deleting) repairMissingReplica(app, blob.id, channel.row.id);
    return { failed: err };
  }
}

/**
 * Read repair: the channel answered that a replica recorded as done does not exist (its directory
 * or bucket does: a missing root is the channel's failure, not this). It is marked failed, even the
 * last copy: the image detail and the channel's counts show it at once, a re-upload of the same
 * bytes writes them again instead of referencing a blob with nothing behind it, and a re-copy is
 * queued now, not at the next daily reconciliation. Put back, the object is served again at once
 * (reads try such copies last, see readOrder) and the queued copy finds it whole and records it done.
 */
function repairMissingReplica(app: BlobReadDeps, blobId: number, channelId: number) {
  recopy(app, blobId, channelId, "读取时发现对象缺失，正在重新复制");
  app.log.warn("副本对象缺失，已标记失败并重新复制", { channel_id: channelId, blob: blobId });
}

/**
 * Read repair for wrong bytes: the channel holds (or sends) something else under the blob's
 * key. With another completed copy left, this one is marked failed (reads and replication stop
 * using it as a source, and it no longer counts as a copy when a channel is deleted) and copied
 * again from a good one. The last copy stays recorded: a peer that corrupts answers in transit
 * may still hold the right bytes, and marking it failed would only make the image unreadable.
 */
function repairCorruptReplica(app: BlobReadDeps, blobId: number, channelId: number) {
  const repaired = giveUpCopy(app, blobId, channelId, "读取时发现数据与 SHA-256 不符，正在重新复制");
  app.log.warn("副本数据与 SHA-256 不符", { channel_id: channelId, blob: blobId, repair: repaired });
}

/** Marks the copy failed and queues a new one, only while another completed copy is left; true if it did. */
function giveUpCopy(app: BlobReadDeps, blobId: number, channelId: number, reason: string): boolean {
  // Fresh rows, not the delivery memo: this decides whether a copy may be given up.
  const others = app.images.replicas(blobId).filter((r) => r.state === "done" && r.channel_id !== channelId);
  if (!others.length) return false;
  recopy(app, blobId, channelId, reason);
  return true;
}

/** The copy recorded failed with `reason`, and a fresh copy queued to run now. */
function recopy(app: BlobReadDeps, blobId: number, channelId: number, reason: string) {
  try {
    app.images.setReplica(blobId, channelId, "failed", reason);
    app.jobs.enqueue(REPLICATE_JOB, { blob_id: blobId, channel_id: channelId }, { uniqueKey: `${blobId}:${channelId}`, expedite: true });
  } catch {
    // The blob or the channel was deleted while it was read: nothing left to repair.
  }
}

/**
 * A failover's WARN: the first for each channel and kind of failure, then one a minute with how many
 * were held back (`kura_channel_reads_total` counts them all). Every anonymous request for an image
 * on a broken channel wrote its own line.
 */
const failoverLogs = new WeakMap<BlobReadDeps["log"], HeldBackLog>();
function logFailover(app: BlobReadDeps, what: string, channel: string, blobId: number, err: unknown) {
  const line = getOrCreate(failoverLogs, app.log, () => new HeldBackLog(Date.now)).admit(channel, what);
  if (line.log) app.log.warn(what, { channel, blob: blobId, err: channelErrorText(err), held_back: line.heldBack });
}
