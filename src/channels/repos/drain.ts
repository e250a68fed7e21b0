/** SQL of deleting a channel and draining it: sole-copy check, writes in flight, ownership of listed objects, the row's removal. */
import type { Database } from "bun:sqlite";
import { deleteMeta } from "../../db/meta";

/**
 * A live image with no completed replica on any channel staying in service except this one, where
 * it has a copy in any state: a failed copy's object may still be there (recorded failed while it
 * could not be read), and a pending one may be a moved channel's unconfirmed copy, all that is left.
 */
export function holdsSoleCopy(db: Database, channelId: number): boolean {
  return !!db
    .query(
      `SELECT 1 FROM blob_channels bc JOIN blobs b ON b.id = bc.blob_id
       WHERE bc.channel_id = ?1 AND b.pending_delete = 0
         AND NOT EXISTS (
           SELECT 1 FROM blob_channels o JOIN channels c ON c.id = o.channel_id
           WHERE o.blob_id = bc.blob_id AND o.channel_id != ?1 AND o.state = 'done' AND c.deleting = 0)
       LIMIT 1`,
    )
    .get(channelId);
}

/**
 * The live blob stored under this key (found by its sha256) whose only completed copy (among channels staying in service)
 * is on this channel: the per-object form of holdsSoleCopy, for copies that became the last one
 * after the purge was accepted (another copy found damaged, say).
 */
export function soleCopyBlobId(db: Database, channelId: number, sha256: string, storageKey: string): number | undefined {
  return db
    .query<{ id: number }, [number, string, string]>(
      `SELECT b.id FROM blobs b JOIN blob_channels bc ON bc.blob_id = b.id AND bc.channel_id = ?1
       WHERE b.sha256 = ?2 AND b.storage_key = ?3 AND b.pending_delete = 0
         AND NOT EXISTS (
           SELECT 1 FROM blob_channels o JOIN channels c ON c.id = o.channel_id
           WHERE o.blob_id = b.id AND o.channel_id != ?1 AND o.state = 'done' AND c.deleting = 0)`,
    )
    .get(channelId, sha256, storageKey)?.id;
}

/** Removes the channel row and everything recorded about it, its meta entry `metaKey` included. */
export function deleteChannelRows(db: Database, channelId: number, metaKey: string) {
  db.query("DELETE FROM upload_intents WHERE channel_id = ?").run(channelId);
  db.query("DELETE FROM blob_channels WHERE channel_id = ?").run(channelId);
  deleteMeta(db, metaKey);
  db.query("DELETE FROM channels WHERE id = ?").run(channelId);
}

/** Whether a job of `kind` whose payload names this channel is running now. */
export function runningJobForChannel(db: Database, kind: string, channelId: number): boolean {
  return !!db.query("SELECT 1 FROM jobs WHERE kind = ? AND state = 'running' AND json_extract(payload, '$.channel_id') = ? LIMIT 1").get(kind, channelId);
}

/** Whether an upload intent on the channel was created after `since` (SQL time). */
export function intentSince(db: Database, channelId: number, since: string): boolean {
  return !!db.query("SELECT 1 FROM upload_intents WHERE channel_id = ? AND created_at > ? LIMIT 1").get(channelId, since);
}

export function storageKeyOfSha(db: Database, sha256: string): string | undefined {
  return db.query<{ storage_key: string }, [string]>("SELECT storage_key FROM blobs WHERE sha256 = ?").get(sha256)?.storage_key;
}

export function intentExists(db: Database, channelId: number, storageKey: string): boolean {
  return !!db.query("SELECT 1 FROM upload_intents WHERE channel_id = ? AND storage_key = ? LIMIT 1").get(channelId, storageKey);
}

/**
 * How many distinct image keys on the channel can be ours: one per blob ever recorded (ids only
 * grow, so the largest is at least the number of blobs, read from the primary key at no cost at
 * any size) plus the channel's upload intents.
 */
export function ourImageKeyBound(db: Database, channelId: number): number {
  const blobs = db.query<{ n: number | null }, []>("SELECT max(id) AS n FROM blobs").get()?.n ?? 0;
  const intents = db.query<{ n: number }, [number]>("SELECT count(*) AS n FROM upload_intents WHERE channel_id = ?").get(channelId)?.n ?? 0;
  return blobs + intents;
}
