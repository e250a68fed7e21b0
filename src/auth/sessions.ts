import type { Database } from "bun:sqlite";
import type { MasterKey } from "../config/master-key";
import { sqlTime } from "../db/time";
import { deleteExpiredSessions, deleteSession, deleteUserSessions, insertSession, type SessionRow, sessionByHash } from "./repo";
import { randomToken, safeEqual, sha256Hex } from "./secrets";

export const SESSION_COOKIE = "kura_session";
export const SESSION_DAYS = 30;

export type { SessionRow };

/** Sessions: the cookie value is random; only its sha256 is stored. Not extended by use. */
export class SessionStore {
  constructor(
    private readonly db: Database,
    private readonly key: MasterKey,
  ) {}

  create(userId: string, now = Date.now()): { token: string; expiresAt: Date } {
    const token = randomToken();
    const expiresAt = new Date(now + SESSION_DAYS * 86_400_000);
    insertSession(this.db, sha256Hex(token), userId, sqlTime(now), sqlTime(expiresAt));
    return { token, expiresAt };
  }

  /** The session's user id when the token is valid and unexpired. */
  lookup(token: string, now = Date.now()): string | undefined {
    const row = sessionByHash(this.db, sha256Hex(token));
    if (!row || row.expires_at <= sqlTime(now)) return undefined;
    return row.user_id;
  }

  delete(token: string) {
    deleteSession(this.db, sha256Hex(token));
  }

  deleteAllForUser(userId: string) {
    deleteUserSessions(this.db, userId);
  }

  pruneExpired(now = Date.now()) {
    deleteExpiredSessions(this.db, sqlTime(now));
  }

  /** CSRF token bound to the session: derived, so nothing extra is stored. */
  csrfFor(token: string): string {
    return this.key.derive("csrf", sha256Hex(token)).toString("base64url");
  }

  csrfMatches(token: string, presented: string | null | undefined): boolean {
    return !!presented && safeEqual(this.csrfFor(token), presented);
  }
}
