/** SQL of the Idempotency-Key records: which image an earlier upload with the same key produced, and when. */
import type { Database } from "bun:sqlite";

export function findIdempotencyKey(db: Database, userId: string, key: string): { image_id: string; created_at: string } | undefined {
  return (
    db
      .query<{ image_id: string; created_at: string }, [string, string]>("SELECT image_id, created_at FROM idempotency_keys WHERE user_id = ? AND key = ?")
      .get(userId, key) ?? undefined
  );
}

/** Forgets keys recorded before `before` (SQL time). */
export function pruneIdempotencyKeys(db: Database, before: string): void {
  db.query("DELETE FROM idempotency_keys WHERE created_at < ?").run(before);
}

/** Remembers which image an upload with this key produced (a later record of the same key replaces it). */
export function recordIdempotencyKey(db: Database, userId: string, key: string, imageId: string, createdAt: string): void {
  db.query("INSERT OR REPLACE INTO idempotency_keys (user_id, key, image_id, created_at) VALUES (?, ?, ?, ?)").run(userId, key, imageId, createdAt);
}
