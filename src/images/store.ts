import { Forbidden, isDiskFull, isOutOfFileDescriptors, QuotaExceeded, Unauthenticated, Unavailable } from "../errors";
import { KeyedTurns } from "../shared/keyed-turns";
import { ACCOUNT_DISABLED, TokenRepo, tokenState } from "../auth/tokens";
import type { AppContext } from "../context";
import { recordIdempotencyKey } from "./repos/idempotency";
import { allIntents, deleteIntent, insertIntent } from "./repos/intents";
import { supersedeObjectKey } from "./repos/object-key";
import { addBlobReference, blobIdByStorageKey, insertBlobRow, insertImageRow } from "./repos/references";
import { expiryTime, sqlTime } from "../db/time";
import type { Driver } from "../channels/driver";
import type { LoadedChannel } from "../channels/registry";
import type { BlobRow } from "./repo";
import { sha256OfStorageKey, storageKeyFor } from "./storage-key";
import type { Dimensions, PreparedImage } from "./upload/prepare";
import { holdAt, markAt, pauseAt } from "../testing/hold-points";
import { awaitedLater } from "../shared/awaited-later";

export { PHASH_JOB, REPLICATE_JOB } from "./job-names";
import { REPLICATE_JOB } from "./job-names";

export interface NewReference {
  userId: string;
  tokenId: number | null;
  fileName: string;
  objectKey: string | null;
  /** When the upload started (sqlTime): a token rotated after it no longer uploads (checkUploadToken). */
  startedAt?: string;
  /** Inside the commit, before the alias moves: throws to refuse the upload (S3's conditional writes); nothing stays written. */
  beforeKeyMoves?: () => void;
  /** What countHeldBytes' counter leaves out for this upload only (the multipart upload it completes). */
  quotaLeavesOut?: string;
  ttlSeconds: number | null;
  idempotencyKey?: string;
}

const noChannel = () => new Unavailable("没有可写入的健康存储渠道，请稍后重试");
const tooFewChannels = (healthy: number, needed: number) =>
  new Unavailable(`可写入的健康存储渠道只有 ${healthy} 个，少于 min_success 要求的 ${needed} 个，请稍后重试`, 30);
export const quotaFull = () => new QuotaExceeded();

/** Per app: bytes a surface holds for a user outside their images, which every quota check counts. */
const heldBytes = new WeakMap<AppContext, (userId: string, leaveOut?: string) => number>();

/**
 * Registers what a surface holds against the quota: S3's open multipart uploads, whose staged and
 * arriving parts count from the first byte (README "S3 uploads"). Registered by that surface when it
 * is mounted (s3/router.ts), since the domain does not import a surface.
 */
export function countHeldBytes(app: AppContext, counter: (userId: string, leaveOut?: string) => number) {
  heldBytes.set(app, counter);
}

/**
 * A write of `size` bytes fits the user's quota: with their images and the bytes held for them
 * (countHeldBytes). Without the latter, parts staged up to the quota left room for any other
 * upload or copy, and the quota could be passed by staging parts first.
 */
export function checkQuota(app: AppContext, userId: string, size: number, quota = app.users.byId(userId)?.quota_bytes, leaveOut?: string) {
  if (quota === null || quota === undefined) return;
  const held = heldBytes.get(app)?.(userId, leaveOut) ?? 0;
  if (app.images.usedBytes(userId) + held + size > quota) throw quotaFull();
}

/**
 * In the commit: the uploader and the token it came with still exist and may upload. Either may
 * have been deleted (a user with no images yet, a revoked token) or the user stopped while the
 * body arrived; the upload then ends as the uploader's next request would, not on a foreign key.
 */
function checkUploader(app: AppContext, ref: NewReference, size: number) {
  const user = app.users.byId(ref.userId);
  if (!user) throw new Unauthenticated("上传者的账号已被删除");
  if (ref.tokenId !== null) checkUploadToken(app, ref.tokenId, ref.startedAt);
  if (user.disabled) throw new Forbidden(ACCOUNT_DISABLED);
  checkQuota(app, ref.userId, size, user.quota_bytes, ref.quotaLeavesOut);
}

/**
 * The token the upload came with may still upload: not deleted, revoked, expired or rotated since the
 * upload started (authorization audit MED-1: a slow body committed minutes after its token was
 * revoked). A rotation sets the token's `created_at`, whole seconds: one within the second the
 * upload started is not seen.
 */
function checkUploadToken(app: AppContext, tokenId: number, startedAt: string | undefined) {
  const token = new TokenRepo(app.db).byId(tokenId);
  if (!token) throw new Unauthenticated("上传令牌已被删除");
  if (tokenState(token) !== "active") throw new Unauthenticated("上传令牌已被吊销或已过期");
  if (startedAt !== undefined && token.created_at > startedAt) throw new Unauthenticated("上传令牌已在上传期间被轮换，请用新令牌重新上传");
}

type Writable = LoadedChannel & { driver: Driver };

/**
 * Writes the bytes synchronously to the `min_success` best healthy channels, trying the
 * next ones when a write fails. Each object is published only after its intent row is
 * committed and the image's header passed its checks, so a crash between the write and the
 * reference's commit cannot leave an untracked object, and a file that is no image is never
 * published. A staging driver (local disk) writes its temp file meanwhile; the others start
 * writing after both.
 */
async function writeSynchronously(app: AppContext, prepared: PreparedImage, key: string): Promise<{ written: Writable[]; intents: number[] }> {
  const candidates = app.channels.writable();
  const minSuccess = app.settings.get().min_success;
  if (candidates.length === 0) throw noChannel();
  // Fewer healthy channels than min_success: say so before writing (and deleting again) anything.
  if (candidates.length < minSuccess) throw tooFewChannels(candidates.length, minSuccess);
  const written: Writable[] = [];
  const intents: number[] = [];
  const failures: unknown[] = [];
  for (const channel of candidates) {
    if (written.length >= minSuccess) break;
    // Marked for deletion while an earlier candidate was being written to: its drain may have started.
    if (!inService(app, channel)) continue;
    const intent = app.commits.run(() => insertIntent(app.db, channel.row.id, key, sqlTime()));
    const body = prepared.bytes ?? Bun.file(prepared.path!).stream();
    // A staging driver awaits this only after it has made the object's directory.
    const publishable = awaitedLater(Promise.all([intent, prepared.dimensions]));
    const [recorded, stored, checked] = await Promise.allSettled([
      intent,
      app.channels.put(channel, key, body, prepared.size, publishable),
      prepared.dimensions,
    ]);
    if (recorded.status === "fulfilled") intents.push(recorded.value);
    if (recorded.status === "rejected" || checked.status === "rejected") {
      // Nothing was published for this channel; the objects of the earlier ones go too.
      await undoWrites(app, key, written, intents);
      throw checked.status === "rejected" ? checked.reason : (recorded as PromiseRejectedResult).reason;
    }
    if (stored.status === "fulfilled") written.push(channel);
    else {
      failures.push(stored.reason);
      app.log.warn("同步写入存储渠道失败，尝试下一个", { channel: channel.row.name, err: (stored.reason as Error).message });
    }
  }
  if (written.length < app.settings.get().min_success) {
    await undoWrites(app, key, written, intents);
    // Every write stopped on a full disk, or on the process's descriptor limit: that is what the
    // client and the operator hear about (ops/server-faults.ts).
    if (failures.length > 0 && (failures.every(isDiskFull) || failures.every(isOutOfFileDescriptors))) throw failures[0];
    throw new Unavailable("成功写入的存储渠道数量不足，请稍后重试", 30);
  }
  return { written, intents };
}

/** Removes objects written for an upload that did not commit, unless a committed blob now owns them. */
async function undoWrites(app: AppContext, key: string, written: Writable[], intents: number[]) {
  const owner = blobIdByStorageKey(app.db, key);
  for (const channel of written) {
    const done = owner !== undefined && app.images.replicas(owner).some((r) => r.channel_id === channel.row.id && r.state === "done");
    if (!done) await channel.driver.delete(key).catch(() => {});
  }
  dropIntents(app, intents);
}

function dropIntents(app: AppContext, intents: number[]) {
  for (const id of intents) deleteIntent(app.db, id);
}

/**
 * Stores a prepared image as a new reference: dedups into an existing blob by sha256
 * or writes a new one, then records blob, replicas, jobs, image and alias in one
 * transaction (shared with the uploads of the same event-loop turn: app.commits). On any
 * failure nothing is left behind, and an image whose header failed its checks is answered
 * with that (415/422) whatever else went wrong.
 */
export async function storeReference(app: AppContext, prepared: PreparedImage, ref: NewReference): Promise<string> {
  try {
    return await storeChecked(app, prepared, ref);
  } catch (err) {
    await prepared.dimensions;
    throw err;
  }
}

/**
 * What the upload planned on changed between the plan and the commit: the blob it counted on
 * was physically deleted (or lost its last copy), or every channel it wrote to is being deleted
 * (a purge checked for sole copies before this blob existed, and its drain would remove the only
 * one). The upload undoes its writes and starts over: a fresh key, channels still in service.
 */
class PlanOutdated extends Error {}

/** Plans outdated by the commit this many times in a row: not a race any more. */
const MAX_PLANS = 3;

async function storeChecked(app: AppContext, prepared: PreparedImage, ref: NewReference): Promise<string> {
  for (let plan = 1; ; plan++) {
    try {
      return await storePlanned(app, prepared, ref);
    } catch (err) {
      if (!(err instanceof PlanOutdated)) throw err;
      // Overtaken again and again: a busy moment a retry gets past, not a server fault.
      if (plan >= MAX_PLANS) throw new Unavailable("图片存储状态正在变化，请稍后重试", 1);
    }
  }
}

/** Uploads rewriting a blob's lost bytes, by sha256. */
const rewrites = new KeyedTurns();

/**
 * Runs `fn` when no other upload of the same bytes is inside its own `whileRewriting`, in arrival
 * order. Bytes whose blob lost every copy are written again under that blob's key, the same key
 * for every upload of them: two at once wrote one object, and the undo of the one that failed or
 * was overtaken deleted it while the other had not committed yet (which then answered 200 for an
 * image nobody could read). One at a time, an undo can only remove its own writes. Only the main
 * thread uploads, so an in-process queue is enough; the last one out removes the entry.
 */
function whileRewriting<T>(sha256: string, fn: () => Promise<T>): Promise<T> {
  return rewrites.run(sha256, fn, () => markAt("upload.rewrite-queued", `sha256=${sha256}`));
}

/** `rewriting`: inside whileRewriting for these bytes, so the plan may write under an existing blob's key. */
async function storePlanned(app: AppContext, prepared: PreparedImage, ref: NewReference, rewriting = false): Promise<string> {
  checkQuota(app, ref.userId, prepared.size, undefined, ref.quotaLeavesOut);
  const existing = app.images.blobBySha(prepared.sha256);
  const needsBytes = !existing || app.images.copiesInService(existing.id) === 0;
  // Planned again once its turn comes: the one before may have stored the bytes meanwhile.
  if (existing && needsBytes && !rewriting) return whileRewriting(prepared.sha256, () => storePlanned(app, prepared, ref, true));
  const key = existing?.storage_key ?? storageKeyFor(prepared.sha256, prepared.ext);
  const { written, intents } = needsBytes ? await writeSynchronously(app, prepared, key) : { written: [], intents: [] };
  if (written.length) await holdAt("upload.before-commit", `key=${key}`);
  await pauseAt("upload.commit", `key=${key} wrote=${written.length}`);

  let outcome: { id: string; ownsWrites: boolean };
  try {
    const dimensions = await prepared.dimensions;
    outcome = await app.commits.run(() => {
      checkUploader(app, ref, prepared.size);
      // The plan holds only if the blob it counted on is still the one recorded: a blob.delete
      // job that claimed it meanwhile deletes its key's objects (ours too, written under that key),
      // and a reference without bytes would add an image that can never be read.
      const current = app.images.blobBySha(prepared.sha256);
      if (existing && current?.id !== existing.id) throw new PlanOutdated();
      if (!needsBytes && (!current || app.images.copiesInService(current.id) === 0)) throw new PlanOutdated();
      if (written.length && !written.some((channel) => inService(app, channel))) throw new PlanOutdated();
      const blob = upsertBlob(app, prepared, dimensions, key, written, current);
      const id = insertImage(app, blob.id, ref);
      const ownsWrites = blob.storage_key === key;
      // Objects no blob owns keep their intents until they are deleted below, so a crash in
      // between still finds them at the next start.
      if (ownsWrites) dropIntents(app, intents);
      return { id, ownsWrites };
    });
  } catch (err) {
    if (written.length) await undoWrites(app, key, written, intents);
    throw err;
  }
  // Another upload of the same bytes committed its blob first (both found none when they
  // started): this reference now points at that blob, and the objects written here are nobody's.
  if (!outcome.ownsWrites && written.length) await undoWrites(app, key, written, intents);
  return outcome.id;
}

/** Still loaded and not being deleted (the registry reloads its rows when a channel is marked). */
function inService(app: AppContext, channel: Writable): boolean {
  const now = app.channels.get(channel.row.id);
  return !!now && !now.row.deleting;
}

/** `current`: the blob with these bytes' sha256 as the commit found it (read just before, in the same unit). */
function upsertBlob(app: AppContext, prepared: PreparedImage, dimensions: Dimensions, key: string, written: Writable[], current: BlobRow | undefined): BlobRow {
  const now = sqlTime();
  let blob = current;
  if (blob) {
    addBlobReference(app.db, blob.id);
  } else {
    const blobId = insertBlobRow(app.db, {
      sha256: prepared.sha256,
      storageKey: key,
      mime: prepared.mime,
      size: prepared.size,
      width: dimensions.width,
      height: dimensions.height,
      createdAt: now,
    });
    blob = app.images.blob(blobId)!;
    // Its perceptual hash comes later, from the sweep (phash-sweep.ts): no job row per upload.
  }
  // Only objects under the blob's own key are its replicas: a concurrent upload of the same
  // bytes that lost the race wrote under a key of its own.
  // A channel removed (purge=false) while the upload was on its way has no row to record a replica
  // against; its copy stays behind with the rest of that channel's objects.
  if (blob.storage_key === key) for (const channel of written) if (app.channels.get(channel.row.id)) app.images.setReplica(blob.id, channel.row.id, "done");
  scheduleReplication(app, blob.id);
  return blob;
}

/** Every loaded, non-draining channel without a done replica gets a pending replica and a job. */
export function scheduleReplication(app: AppContext, blobId: number) {
  const have = new Map(app.images.replicas(blobId).map((r) => [r.channel_id, r.state]));
  for (const channel of app.channels.list()) {
    if (channel.row.deleting || have.get(channel.row.id) === "done") continue;
    if (!have.has(channel.row.id)) app.images.setReplica(blobId, channel.row.id, "pending");
    app.jobs.enqueue(REPLICATE_JOB, { blob_id: blobId, channel_id: channel.row.id }, { uniqueKey: `${blobId}:${channel.row.id}` });
  }
}

function insertImage(app: AppContext, blobId: number, ref: NewReference): string {
  const now = Date.now();
  if (ref.objectKey) {
    ref.beforeKeyMoves?.();
    // Re-uploading a key re-points the alias to the new image.
    supersedeObjectKey(app.db, ref.userId, ref.objectKey);
    app.lookups.forgetAlias(ref.userId, ref.objectKey);
  }
  const expireAt = ref.ttlSeconds ? expiryTime(now, ref.ttlSeconds) : null;
  const id = app.images.unusedId();
  insertImageRow(app.db, {
    id,
    blobId,
    userId: ref.userId,
    tokenId: ref.tokenId,
    fileName: ref.fileName,
    objectKey: ref.objectKey,
    expireAt,
    ttlSeconds: ref.ttlSeconds || null,
    createdAt: sqlTime(now),
    // Digests this upload computes are marked once recorded (upload/service.ts, s3/ops/objects.ts):
    // the blob may already carry some that another reference's upload computed.
    ownDigests: 0,
  });
  if (ref.idempotencyKey) recordIdempotencyKey(app.db, ref.userId, ref.idempotencyKey, id, sqlTime(now));
  return id;
}

/** Startup: objects written for uploads that never committed are deleted (crash safety). */
export async function resolveUploadIntents(app: AppContext) {
  const rows = allIntents(app.db);
  for (const row of rows) {
    const channel = app.channels.get(row.channel_id);
    const owner = blobIdByStorageKey(app.db, row.storage_key);
    const owned = owner !== undefined && app.images.replicas(owner).some((r) => r.channel_id === row.channel_id && r.state === "done");
    // A physical delete cut short (images/jobs.ts) may have left the blob's cached variants too.
    const sha256 = sha256OfStorageKey(row.storage_key);
    if (owner === undefined && sha256 && !app.images.blobBySha(sha256)) await app.variants.dropBlob(sha256);
    if (!owned) {
      if (!channel?.driver) continue; // keep the intent until the channel loads again
      try {
        await channel.driver.delete(row.storage_key);
      } catch {
        continue;
      }
    }
    deleteIntent(app.db, row.id);
  }
}
