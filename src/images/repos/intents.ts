/**
 * SQL of upload intents: a row per object written to a channel before its upload committed, so a
 * crash leaves a record of what to remove and reconcile/drain never judge such an object.
 */
import type { Database } from "bun:sqlite";

/** Storage keys with an open upload intent on the channel. */
export function intentKeysOnChannel(db: Database, channelId: number): string[] {
  return db
    .query<{ storage_key: string }, [number]>("SELECT storage_key FROM upload_intents WHERE channel_id = ?")
    .all(channelId)
    .map((r) => r.storage_key);
}
