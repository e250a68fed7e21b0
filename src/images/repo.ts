import type { Database } from "bun:sqlite";
import { randomBytes } from "node:crypto";
import { sqlTime } from "../db/time";
import { userUsage } from "../ops/usage";

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
}

export interface ReplicaRow {
  blob_id: number;
  channel_id: number;
  state: string;
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

/**
 * Storage key of a new blob: fanned out by hash so no directory grows huge, with a random
 * generation suffix so a blob re-created after a physical delete never shares a key with
 * the objects that delete is still removing.
 */
export function storageKeyFor(sha256: string, ext: string): string {
  return `img/${sha256.slice(0, 2)}/${sha256.slice(2, 4)}/${sha256}-${randomBytes(4).toString("hex")}.${ext}`;
}

export const STORAGE_KEY_PATTERN = /^img\/[0-9a-f]{2}\/[0-9a-f]{2}\/[0-9a-f]{64}-[0-9a-f]{8}\.[a-z0-9]+$/;

/** How long the set of channels holding a blob may be reused on the read path. */
const DONE_CHANNELS_TTL_MS = 2_000;

export class ImageRepo {
  private readonly doneCache = new Map<number, { ids: number[]; at: number }>();

  constructor(private readonly db: Database) {}

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

  byObjectKey(userId: string, objectKey: string): ImageView | undefined {
    return this.db.query<ImageView, [string, string]>(`${IMAGE_VIEW_SQL} WHERE i.user_id = ? AND i.object_key = ?`).get(userId, objectKey) ?? undefined;
  }

  replicas(blobId: number): ReplicaRow[] {
    return this.db.query<ReplicaRow, [number]>("SELECT * FROM blob_channels WHERE blob_id = ?").all(blobId);
  }

  doneReplicaCount(blobId: number): number {
    return this.db.query<{ n: number }, [number]>("SELECT COUNT(*) AS n FROM blob_channels WHERE blob_id = ? AND state = 'done'").get(blobId)!.n;
  }

  setReplica(blobId: number, channelId: number, state: string, error = "", countAttempt = false) {
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
}
