import type { Database } from "bun:sqlite";
import type { MasterKey } from "../config/master-key";
import { sqlTime } from "../db/time";
import {
  deleteExpiredSessions,
  deleteSession,
  deleteUserSessions,
  deleteUserSessionsExcept,
  insertSession,
  type SessionRow,
  sessionByHash,
  userSessions,
} from "./repo";
import { truncateText } from "../shared/text";
import { randomToken, safeEqual, sha256Hex } from "./secrets";

export const SESSION_COOKIE = "kura_session";
export const SESSION_DAYS = 30;

export type { SessionRow };

/** Where a session logged in from, as its owner's session list shows it. */
export interface SessionOrigin {
  client: string;
  userAgent: string;
}

/** One session in its owner's list (GET /api/admin/me/sessions). */
export interface SessionView {
  id: string;
  created_at: string;
  expires_at: string;
  client: string;
  user_agent: string;
  current: boolean;
}

/** A User-Agent is the browser's to choose: kept to this many characters. */
const MAX_ORIGIN_CHARS = 256;

/**
 * The id a session is shown and ended by: derived from the stored hash, so the list reveals
 * neither the hash nor an order of logins, and an id cannot be turned back into either.
 */
const publicSessionId = (idHash: string) => sha256Hex(`session-id:${idHash}`).slice(0, 24);

/** Sessions: the cookie value is random; only its sha256 is stored. Not extended by use. */
export class SessionStore {
  constructor(
    private readonly db: Database,
    private readonly key: MasterKey,
  ) {}

  create(userId: string, now = Date.now(), origin: SessionOrigin = { client: "", userAgent: "" }): { token: string; expiresAt: Date } {
    const token = randomToken();
    const expiresAt = new Date(now + SESSION_DAYS * 86_400_000);
    insertSession(this.db, {
      idHash: sha256Hex(token),
      userId,
      createdAt: sqlTime(now),
      expiresAt: sqlTime(expiresAt),
      client: truncateText(origin.client, MAX_ORIGIN_CHARS),
      userAgent: truncateText(origin.userAgent, MAX_ORIGIN_CHARS),
    });
    return { token, expiresAt };
  }

  /** The user's unexpired sessions, newest first, the one `currentToken` names marked. */
  list(userId: string, currentToken: string, now = Date.now()): SessionView[] {
    const current = sha256Hex(currentToken);
    return userSessions(this.db, userId, sqlTime(now)).map((row) => ({
      id: publicSessionId(row.id_hash),
      created_at: row.created_at,
      expires_at: row.expires_at,
      client: row.client,
      user_agent: row.user_agent,
      current: row.id_hash === current,
    }));
  }

  /**
   * Ends the user's session with this public id; false when the user has none by that id (another
   * user's session is not found either). A user has a handful of sessions, so each id is derived
   * on the spot rather than stored.
   */
  endById(userId: string, id: string, now = Date.now()): boolean {
    const row = userSessions(this.db, userId, sqlTime(now)).find((r) => safeEqual(publicSessionId(r.id_hash), id));
    if (!row) return false;
    deleteSession(this.db, row.id_hash);
    return true;
  }

  /** Ends every session of the user except the one `keepToken` names; returns how many ended. */
  endOthers(userId: string, keepToken: string): number {
    return deleteUserSessionsExcept(this.db, userId, sha256Hex(keepToken));
  }

  /** Whether the public id names the session of this token. */
  isCurrent(id: string, token: string): boolean {
    return safeEqual(publicSessionId(sha256Hex(token)), id);
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
