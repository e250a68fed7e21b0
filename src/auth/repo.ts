/** SQL of the auth tables: sessions and upload tokens (both stored by the sha256 of their secret). */
import type { Database } from "bun:sqlite";

/** An upload token as stored: only the sha256 of its plaintext. */
export interface TokenRow {
  id: number;
  user_id: string;
  name: string;
  prefix: string;
  secret_hash: string;
  scopes: string;
  expires_at: string | null;
  last_used_at: string | null;
  revoked_at: string | null;
  created_at: string;
  /** '' the console or the admin API; 'lsky' POST /api/v1/tokens (migration 0015). */
  issued_via: TokenOrigin;
}

/** Which surface issued a token: DELETE /api/v1/tokens revokes only those of Lsky's token endpoint. */
export type TokenOrigin = "" | "lsky";

export interface SessionRow {
  user_id: string;
  expires_at: string;
}

/** A session as its owner's list shows it (migration 0017: where it logged in from). */
export interface SessionListRow {
  id_hash: string;
  created_at: string;
  expires_at: string;
  client: string;
  user_agent: string;
}

/**
 * Sessions one user keeps: a login beyond it ends their oldest. Correct logins cost no login
 * budget, so without a bound an account looping its own password added a 30-day row ten times a
 * second, and its sessions list grew with them.
 */
export const MAX_SESSIONS_PER_USER = 100;

export function insertSession(
  db: Database,
  row: { idHash: string; userId: string; createdAt: string; expiresAt: string; client: string; userAgent: string },
): void {
  db.query("INSERT INTO sessions (id_hash, user_id, created_at, expires_at, client, user_agent) VALUES (?, ?, ?, ?, ?, ?)").run(
    row.idHash,
    row.userId,
    row.createdAt,
    row.expiresAt,
    row.client,
    row.userAgent,
  );
  db.query(
    `DELETE FROM sessions WHERE user_id = ?1 AND rowid NOT IN (
       SELECT rowid FROM sessions WHERE user_id = ?1 ORDER BY rowid DESC LIMIT ?2)`,
  ).run(row.userId, MAX_SESSIONS_PER_USER);
}

/** The user's unexpired sessions, newest first. */
export function userSessions(db: Database, userId: string, now: string): SessionListRow[] {
  return db
    .query<SessionListRow, [string, string]>(
      "SELECT id_hash, created_at, expires_at, client, user_agent FROM sessions WHERE user_id = ? AND expires_at > ? ORDER BY created_at DESC, id_hash",
    )
    .all(userId, now);
}

/** Ends every session of the user but one; returns how many ended. */
export function deleteUserSessionsExcept(db: Database, userId: string, keepHash: string): number {
  return db.query("DELETE FROM sessions WHERE user_id = ? AND id_hash <> ?").run(userId, keepHash).changes;
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

/** Ends every session (after a restore swapped in a snapshot); returns how many there were. */
export function deleteAllSessions(db: Database): number {
  return db.query("DELETE FROM sessions").run().changes;
}

/** Deletes the sessions expired at `now` (SQL time text). */
export function deleteExpiredSessions(db: Database, now: string): void {
  db.query("DELETE FROM sessions WHERE expires_at <= ?").run(now);
}

export function tokenById(db: Database, id: number): TokenRow | undefined {
  return db.query<TokenRow, [number]>("SELECT * FROM tokens WHERE id = ?").get(id) ?? undefined;
}

export function tokenByPrefix(db: Database, prefix: string): TokenRow | undefined {
  return db.query<TokenRow, [string]>("SELECT * FROM tokens WHERE prefix = ?").get(prefix) ?? undefined;
}

/** Newest first; a rotated token counts as new. */
export function tokensOfUser(db: Database, userId: string, limit: number, offset: number): { rows: TokenRow[]; total: number } {
  const rows = db
    .query<TokenRow, [string, number, number]>("SELECT * FROM tokens WHERE user_id = ? ORDER BY created_at DESC, id DESC LIMIT ? OFFSET ?")
    .all(userId, limit, offset);
  const total = db.query<{ n: number }, [string]>("SELECT COUNT(*) AS n FROM tokens WHERE user_id = ?").get(userId)!.n;
  return { rows, total };
}

/** The new token's id; throws SQLite's UNIQUE error when the owner already has a token of that name. */
export function insertToken(
  db: Database,
  t: { userId: string; name: string; prefix: string; secretHash: string; expiresAt: string | null; createdAt: string; issuedVia: TokenOrigin },
): number {
  return db
    .query<{ id: number }, [string, string, string, string, string | null, string, string]>(
      "INSERT INTO tokens (user_id, name, prefix, secret_hash, scopes, expires_at, created_at, issued_via) VALUES (?, ?, ?, ?, 'upload', ?, ?, ?) RETURNING id",
    )
    .get(t.userId, t.name, t.prefix, t.secretHash, t.expiresAt, t.createdAt, t.issuedVia)!.id;
}

/** New prefix and secret for a token active at `now`, in one statement; the token's name, or undefined when not active. */
export function replaceTokenSecret(db: Database, id: number, prefix: string, secretHash: string, now: string): string | undefined {
  return db
    .query<{ name: string }, [string, string, string, number, string]>(
      `UPDATE tokens SET prefix = ?, secret_hash = ?, created_at = ?, last_used_at = NULL
         WHERE id = ? AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > ?) RETURNING name`,
    )
    .get(prefix, secretHash, now, id, now)?.name;
}

/** True when this call revoked it; a second revoke keeps the first revoked_at. */
export function revokeToken(db: Database, id: number, now: string): boolean {
  return db.query("UPDATE tokens SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL").run(now, id).changes > 0;
}

/**
 * Revokes at `now` the user's tokens not yet revoked that `via` issued, and the token `alsoId`
 * whatever issued it; the ones this call revoked. One statement: a token issued meanwhile is
 * either revoked or not yet there.
 */
export function revokeTokensIssuedVia(db: Database, userId: string, via: TokenOrigin, alsoId: number, now: string): { id: number; name: string }[] {
  return db
    .query<{ id: number; name: string }, [string, string, string, number]>(
      "UPDATE tokens SET revoked_at = ? WHERE user_id = ? AND revoked_at IS NULL AND (issued_via = ? OR id = ?) RETURNING id, name",
    )
    .all(now, userId, via, alsoId);
}

/** How many of the user's tokens `via` issued are still usable (not revoked, not expired). */
export function liveTokensIssuedVia(db: Database, userId: string, via: TokenOrigin, now: string): number {
  return (
    db
      .query<{ n: number }, [string, string, string]>(
        "SELECT count(*) AS n FROM tokens WHERE user_id = ? AND issued_via = ? AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > ?)",
      )
      .get(userId, via, now)?.n ?? 0
  );
}

export function deleteToken(db: Database, id: number): void {
  db.query("DELETE FROM tokens WHERE id = ?").run(id);
}

export function setTokenLastUsed(db: Database, id: number, at: string): void {
  db.query("UPDATE tokens SET last_used_at = ? WHERE id = ?").run(at, id);
}
