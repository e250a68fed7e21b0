/** SQL of the auth tables: sessions (stored by the sha256 of their cookie value). */
import type { Database } from "bun:sqlite";

export interface SessionRow {
  user_id: string;
  expires_at: string;
}

export function insertSession(db: Database, idHash: string, userId: string, createdAt: string, expiresAt: string): void {
  db.query("INSERT INTO sessions (id_hash, user_id, created_at, expires_at) VALUES (?, ?, ?, ?)").run(idHash, userId, createdAt, expiresAt);
}

export function sessionByHash(db: Database, idHash: string): SessionRow | undefined {
  return db.query<SessionRow, [string]>("SELECT user_id, expires_at FROM sessions WHERE id_hash = ?").get(idHash) ?? undefined;
}

export function deleteSession(db: Database, idHash: string): void {
  db.query("DELETE FROM sessions WHERE id_hash = ?").run(idHash);
}

export function deleteUserSessions(db: Database, userId: string): void {
  db.query("DELETE FROM sessions WHERE user_id = ?").run(userId);
}

/** Deletes the sessions expired at `now` (SQL time text). */
export function deleteExpiredSessions(db: Database, now: string): void {
  db.query("DELETE FROM sessions WHERE expires_at <= ?").run(now);
}
