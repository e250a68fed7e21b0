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

/** Records the intent before the write; returns its id. */
export function insertIntent(db: Database, channelId: number, storageKey: string, createdAt: string): number {
  return Number(
    db.query("INSERT INTO upload_intents (channel_id, storage_key, created_at) VALUES (?, ?, ?)").run(channelId, storageKey, createdAt).lastInsertRowid,
  );
}

export function deleteIntent(db: Database, id: number): void {
  db.query("DELETE FROM upload_intents WHERE id = ?").run(id);
}

export function allIntents(db: Database): { id: number; channel_id: number; storage_key: string }[] {
  return db.query<{ id: number; channel_id: number; storage_key: string }, []>("SELECT * FROM upload_intents").all();
}
