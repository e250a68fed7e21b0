import type { Database } from "bun:sqlite";
import { expiryTime, sqlTime } from "../db/time";
import { userUsage } from "../ops/repos/usage";
import { newShortId } from "./short-id";

export interface BlobRow {
  id: number;
  sha256: string;
  phash: string;
  storage_key: string;
  mime: string;
  size: number;
  width: number;
  height: number;
  ref_count: number;
  pending_delete: number;
  delete_after: string | null;
  created_at: string;
}

export interface ImageRow {
  id: string;
  blob_id: number;
  user_id: string;
  token_id: number | null;
  file_name: string;
  object_key: string | null;
  expire_at: string | null;
  ttl_seconds: number | null;
  last_public_access_at: string | null;
  access_count: number;
  pending_cleanup: number;
  cleanup_exempt: number;
  created_at: string;
  /** Which of the blob's digests this image's own upload computed (OWN_MD5 | OWN_SHA1, repos/blob-md5.ts; migration 0016). */
  own_digests: number;
}

/** Where one blob stands on one channel: being copied, copied, given up for now, being removed. */
export type ReplicaState = "pending" | "done" | "failed" | "deleting";

export interface ReplicaRow {
  blob_id: number;
  channel_id: number;
  state: ReplicaState;
  attempts: number;
  last_error: string;
  updated_at: string;
}

/** Image reference joined with its blob and token, the shape list and detail views start from. */
export interface ImageView extends ImageRow {
  mime: string;
  size: number;
  width: number;
  height: number;
  sha256: string;
  ref_count: number;
  storage_key: string;
  token_name: string | null;
}

export const IMAGE_VIEW_SQL = `
  SELECT i.*, b.mime, b.size, b.width, b.height, b.sha256, b.ref_count, b.storage_key, t.name AS token_name
  FROM images i JOIN blobs b ON b.id = i.blob_id LEFT JOIN tokens t ON t.id = i.token_id`;

/** List orders (the Lsky Pro list's): by upload time or by size, each with the rowid as tie-break (repos/user-list.ts). */
export type ImageOrder = "newest" | "earliest" | "largest" | "smallest";

/** How long the set of channels holding a blob may be reused on the read path. */
const DONE_CHANNELS_TTL_MS = 2_000;

export class ImageRepo {
  private readonly doneCache = new Map<number, { ids: number[]; at: number }>();

  constructor(private readonly db: Database) {}

  /** A new lifetime counted from now (0 seconds = permanent). */
  setTtl(id: string, seconds: number, now = Date.now()): void {
    this.db.query("UPDATE images SET expire_at = ?, ttl_seconds = ? WHERE id = ?").run(seconds ? expiryTime(now, seconds) : null, seconds || null, id);
  }

  /** Exempting takes the image off the cleanup list; un-exempting lets the next scan judge it again. */
  setCleanupExempt(id: string, exempt: boolean): void {
    this.db.query("UPDATE images SET cleanup_exempt = ?, pending_cleanup = 0 WHERE id = ?").run(exempt ? 1 : 0, id);
  }

  /**
   * Channels holding a completed replica of a blob, memoized briefly for the delivery
   * hot path; replica changes made here forget the entry, and a stale list only costs a
   * failover read.
   */
  doneChannelIds(blobId: number): number[] {
    const hit = this.doneCache.get(blobId);
    if (hit && Date.now() - hit.at < DONE_CHANNELS_TTL_MS) return hit.ids;
    const ids = this.db
      .query<{ channel_id: number }, [number]>("SELECT channel_id FROM blob_channels WHERE blob_id = ? AND state = 'done'")
      .all(blobId)
      .map((r) => r.channel_id);
    this.doneCache.set(blobId, { ids, at: Date.now() });
    if (this.doneCache.size > 20_000) this.doneCache.delete(this.doneCache.keys().next().value!);
    return ids;
  }

  blobBySha(sha256: string): BlobRow | undefined {
    return this.db.query<BlobRow, [string]>("SELECT * FROM blobs WHERE sha256 = ?").get(sha256) ?? undefined;
  }

  blob(id: number): BlobRow | undefined {
    return this.db.query<BlobRow, [number]>("SELECT * FROM blobs WHERE id = ?").get(id) ?? undefined;
  }

  view(id: string): ImageView | undefined {
    return this.db.query<ImageView, [string]>(`${IMAGE_VIEW_SQL} WHERE i.id = ?`).get(id) ?? undefined;
  }

  /** A new short id no image row holds yet (a primary-key probe per try, not the view's join). */
  unusedId(): string {
    const taken = this.db.query<{ one: number }, [string]>("SELECT 1 AS one FROM images WHERE id = ?");
    for (;;) {
      const id = newShortId();
      if (!taken.get(id)) return id;
    }
  }

  byObjectKey(userId: string, objectKey: string): ImageView | undefined {
    return this.db.query<ImageView, [string, string]>(`${IMAGE_VIEW_SQL} WHERE i.user_id = ? AND i.object_key = ?`).get(userId, objectKey) ?? undefined;
  }

  replicas(blobId: number): ReplicaRow[] {
    return this.db.query<ReplicaRow, [number]>("SELECT * FROM blob_channels WHERE blob_id = ?").all(blobId);
  }

  /**
   * Completed copies on channels staying in service: what a new reference may count on. A copy on
   * a channel being purged is deleted by its drain whatever references it (a blob in its delete
   * grace is nobody's sole copy when the purge is accepted).
   */
  copiesInService(blobId: number): number {
    return this.db
      .query<{ n: number }, [number]>(
        "SELECT COUNT(*) AS n FROM blob_channels bc JOIN channels c ON c.id = bc.channel_id WHERE bc.blob_id = ? AND bc.state = 'done' AND c.deleting = 0",
      )
      .get(blobId)!.n;
  }

  /**
   * Every completed copy on the channel back to `pending`: it was made at a place the channel no
   * longer points at, so it proves nothing until checked there or copied again (replication).
   */
  unverifyCopiesOn(channelId: number, reason: string): number {
    this.doneCache.clear();
    return this.db
      .query("UPDATE blob_channels SET state = 'pending', last_error = ?2, updated_at = ?3 WHERE channel_id = ?1 AND state = 'done'")
      .run(channelId, reason, sqlTime()).changes;
  }

  setReplica(blobId: number, channelId: number, state: ReplicaState, error = "", countAttempt = false) {
    this.doneCache.delete(blobId);
    this.db
      .query(
        `INSERT INTO blob_channels (blob_id, channel_id, state, attempts, last_error, updated_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6)
         ON CONFLICT(blob_id, channel_id) DO UPDATE SET state = ?3, attempts = attempts + ?4, last_error = ?5, updated_at = ?6`,
      )
      .run(blobId, channelId, state, countAttempt ? 1 : 0, error, sqlTime());
  }

  /** Bytes a user's references count for (in full per reference), from the usage rollup. */
  usedBytes(userId: string): number {
    return userUsage(this.db, userId).bytes;
  }

  /** How many references to the blob this user holds (a non-admin sees only their own count). */
  ownReferences(blobId: number, userId: string): number {
    return this.db.query<{ n: number }, [number, string]>("SELECT COUNT(*) AS n FROM images WHERE blob_id = ? AND user_id = ?").get(blobId, userId)!.n;
  }

  /**
   * Records a generated variant so a CDN purge can name every generated URL of the image; the
   * row outlives the cached file and goes only with the blob (ON DELETE CASCADE).
   */
  recordVariant(blobId: number, width: number, format: string, size: number): void {
    this.db
      .query("INSERT OR REPLACE INTO variants (blob_id, width, format, size, created_at) VALUES (?, ?, ?, ?, ?)")
      .run(blobId, width, format, size, sqlTime());
  }

  /** Generated variants of a blob, the URLs a CDN may hold. */
  variantsOf(blobId: number): { width: number; format: string }[] {
    return this.db
      .query<{ width: number; format: string }, [number]>("SELECT width, format FROM variants WHERE blob_id = ? ORDER BY width, format")
      .all(blobId);
  }

  setPhash(blobId: number, hash: string): void {
    this.db.query("UPDATE blobs SET phash = ? WHERE id = ?").run(hash, blobId);
  }

  /** Removes the blob row (its replica and variant rows go with it, ON DELETE CASCADE). */
  deleteBlobRow(blobId: number): void {
    this.db.query("DELETE FROM blobs WHERE id = ?").run(blobId);
  }

  /** A pending replica on the channel for every live blob that has none there yet (a new channel's backfill). */
  addPendingReplicasForAll(channelId: number): void {
    this.db
      .query(
        `INSERT INTO blob_channels (blob_id, channel_id, state, attempts, last_error, updated_at)
         SELECT id, ?1, 'pending', 0, '', ?2 FROM blobs WHERE pending_delete = 0
         ON CONFLICT (blob_id, channel_id) DO NOTHING`,
      )
      .run(channelId, sqlTime());
  }

  /** The next batch of blobs, after `afterBlobId` in id order, whose replica on the channel is pending or failed. */
  unfinishedReplicaBatch(channelId: number, afterBlobId: number, limit: number): number[] {
    return this.db
      .query<{ blob_id: number }, [number, number, number]>(
        "SELECT blob_id FROM blob_channels WHERE channel_id = ? AND state IN ('pending', 'failed') AND blob_id > ? ORDER BY blob_id LIMIT ?",
      )
      .all(channelId, afterBlobId, limit)
      .map((r) => r.blob_id);
  }

  /** Every blob with the state of its replica on the channel (null when it has none there), for reconciliation. */
  blobStatesOn(channelId: number): { id: number; storage_key: string; state: string | null }[] {
    return this.db
      .query<{ id: number; storage_key: string; state: string | null }, [number]>(
        `SELECT b.id, b.storage_key, bc.state FROM blobs b LEFT JOIN blob_channels bc ON bc.blob_id = b.id AND bc.channel_id = ?`,
      )
      .all(channelId);
  }

  /** How many replicas are in each state, over all channels. */
  replicaStateCounts(): { state: string; n: number }[] {
    return this.db.query<{ state: string; n: number }, []>("SELECT state, COUNT(*) AS n FROM blob_channels GROUP BY state ORDER BY state").all();
  }

  /** Completed replicas on one channel. */
  doneReplicasOn(channelId: number): number {
    return this.db.query<{ n: number }, [number]>("SELECT COUNT(*) AS n FROM blob_channels WHERE channel_id = ? AND state = 'done'").get(channelId)!.n;
  }
}
