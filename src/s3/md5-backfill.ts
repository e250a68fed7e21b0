/**
 * MD5s of blobs stored without one (before S3 support, or uploaded when uploads did not keep it),
 * computed in the background instead of inside a listing. A listing answers such an object with a
 * stand-in ETag (`etagOf`) and queues its blob here; one worker per app hashes the queued blobs one
 * at a time, streaming their bytes (each chunk is its own turn of the loop), and remembers each MD5.
 * A blob that cannot be read (an offline channel, a lost replica) is logged and tried again only after
 * RETRY_MS: it never fails a listing, which never reads bytes.
 */
import { createHash } from "node:crypto";
import type { AppContext } from "../context";
import { openBlob } from "../images/read";
import type { S3Object } from "./object";
import { multipartEtagOf } from "./object-meta";
import { blobMd5, setBlobMd5 } from "../images/repos/blob-md5";

/** Blobs waiting at most; a listing of a huge un-hashed bucket queues the rest on its next pages. */
const MAX_QUEUED = 10_000;
const RETRY_MS = 10 * 60_000;

interface Backfill {
  queue: Map<number, string>;
  failedAt: Map<number, number>;
  running: boolean;
}

const backfills = new WeakMap<AppContext, Backfill>();

function backfillOf(app: AppContext): Backfill {
  let b = backfills.get(app);
  if (!b) {
    b = { queue: new Map(), failedAt: new Map(), running: false };
    backfills.set(app, b);
  }
  return b;
}

/**
 * The ETag a listing gives `object` without reading its bytes: the MD5 when known; otherwise a
 * multipart-style `<hex>-1` built from the blob's SHA-256, which clients read as "not an MD5"
 * (rclone then asks HEAD for the hash instead of comparing; HEAD answers the real MD5), and the blob
 * is queued for the backfill, so a later listing carries the MD5.
 */
export function listingEtag(app: AppContext, object: S3Object): string {
  const multipart = multipartEtagOf(object);
  if (multipart) return multipart;
  if (object.md5) return object.md5;
  queueMd5(app, object.blob_id, object.storage_key);
  return `${object.sha256.slice(0, 32)}-1`;
}

export function queueMd5(app: AppContext, blobId: number, storageKey: string) {
  const b = backfillOf(app);
  const failed = b.failedAt.get(blobId);
  if (failed !== undefined && Date.now() - failed < RETRY_MS) return;
  if (b.queue.size >= MAX_QUEUED || b.queue.has(blobId)) return;
  b.queue.set(blobId, storageKey);
  if (!b.running) void run(app, b);
}

/** Streams the blob's bytes through MD5 (never the whole file in memory, never one long turn). */
export async function hashBlob(app: AppContext, blobId: number, storageKey: string): Promise<string> {
  const { stream } = await openBlob(app, { id: blobId, storage_key: storageKey });
  const hash = createHash("md5");
  for await (const chunk of stream) hash.update(chunk);
  return hash.digest("hex");
}

async function run(app: AppContext, b: Backfill) {
  b.running = true;
  try {
    for (const [blobId, storageKey] of b.queue) {
      b.queue.delete(blobId);
      try {
        // Known meanwhile (an upload of the same bytes, a HEAD): nothing to read.
        if (blobMd5(app.db, blobId) !== "") continue;
        setBlobMd5(app.db, blobId, await hashBlob(app, blobId, storageKey));
        b.failedAt.delete(blobId);
      } catch (err) {
        if (isClosed(err)) return;
        b.failedAt.set(blobId, Date.now());
        app.log.warn("S3 对象的 MD5 暂时无法计算，稍后重试", { blob: blobId, err: (err as Error).message });
      }
      await Bun.sleep(1);
    }
  } finally {
    b.running = false;
  }
}

const isClosed = (err: unknown) => err instanceof Error && /closed database/i.test(err.message);

/** Waits until the queue is empty (tests). */
export async function md5BackfillIdle(app: AppContext): Promise<void> {
  const b = backfillOf(app);
  while (b.running || b.queue.size) await Bun.sleep(5);
}
