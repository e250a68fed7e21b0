import { Forbidden, Unauthenticated } from "../errors";
import type { Database } from "bun:sqlite";
import { randomBytes } from "node:crypto";
import type { AppContext } from "../context";
import type { MasterKey } from "../config/master-key";
import { sqlTime } from "../db/time";
import type { UserRow } from "../users/repo";
import {
  deleteToken,
  insertToken,
  type TokenOrigin,
  type TokenRow,
  replaceTokenSecret,
  revokeToken,
  revokeTokensIssuedVia,
  liveTokensIssuedVia,
  setTokenLastUsed,
  tokenById,
  tokenByPrefix,
  tokensOfUser,
} from "./repo";
import { randomToken, safeEqual, sha256Hex } from "./secrets";

/**
 * Upload tokens (spec 2.4, 2.5, 3.1, 5).
 *
 * Plaintext: `kura_<id12>_<secret43>`. `kura_<id12>` is the prefix: unique, listed,
 * and equal to the S3 access key id. Only sha256(plaintext) is stored; a lookup
 * goes by prefix, then compares hashes in constant time.
 */
export type { TokenRow };

/** The list item of spec 2.4: no hash, no plaintext, no owner (nor the issuing surface, which only Lsky's clear reads). */
export type TokenItem = Omit<TokenRow, "user_id" | "secret_hash" | "issued_via">;

/** What issue and rotate return; the only moment the plaintext exists outside the client. */
export interface IssuedToken {
  id: number;
  name: string;
  prefix: string;
  token: string;
}

export type TokenState = "active" | "expired" | "revoked";

export const TOKEN_TEXT_PREFIX = "kura_";
const BASE32 = "abcdefghijklmnopqrstuvwxyz234567";
const PLAINTEXT = /^(kura_[a-z2-7]{12})_[A-Za-z0-9_-]{43}$/;
/** Usage is recorded at most this often per token, so uploads do not each cost a write. */
export const LAST_USED_RESOLUTION_MS = 60_000;

/** Deps the token functions need; a subset of AppContext so a unit test can build it from a bare database. */
export type TokenDeps = Pick<AppContext, "db" | "key" | "users">;

export function newTokenPlaintext(): { prefix: string; plaintext: string } {
  // 256 is a multiple of 32, so masking a byte to 5 bits is unbiased.
  const id = [...randomBytes(12)].map((b) => BASE32[b & 31]).join("");
  const prefix = TOKEN_TEXT_PREFIX + id;
  return { prefix, plaintext: `${prefix}_${randomToken(32)}` };
}

/** The prefix of a well-formed plaintext, else undefined. */
export function tokenPrefixOf(plaintext: string): string | undefined {
  return PLAINTEXT.exec(plaintext)?.[1];
}

export function tokenState(row: TokenRow, now = Date.now()): TokenState {
  if (row.revoked_at) return "revoked";
  if (row.expires_at && row.expires_at <= sqlTime(now)) return "expired";
  return "active";
}

export function hasUploadScope(row: TokenRow): boolean {
  return row.scopes.split(/[\s,]+/).includes("upload");
}

export function toTokenItem(row: TokenRow): TokenItem {
  const { user_id: _owner, secret_hash: _hash, issued_via: _via, ...item } = row;
  return item;
}

/**
 * The S3 secret access key of a token: derived from the master key, never stored.
 * It is bound to the prefix too, so rotation (new prefix, same id) changes it.
 */
export function s3SecretFor(key: MasterKey, row: Pick<TokenRow, "id" | "prefix">): string {
  return key.derive("s3-secret", row.id, row.prefix).toString("base64url").slice(0, 40);
}

export class TokenNameTakenError extends Error {}

function isNameConflict(err: unknown): boolean {
  return err instanceof Error && /UNIQUE constraint failed: tokens\.user_id, tokens\.name/.test(err.message);
}

export class TokenRepo {
  constructor(private readonly db: Database) {}

  byId(id: number): TokenRow | undefined {
    return tokenById(this.db, id);
  }

  byPrefix(prefix: string): TokenRow | undefined {
    return tokenByPrefix(this.db, prefix);
  }

  /** Newest first; a rotated token counts as new. */
  listForUser(userId: string, limit: number, offset: number): { items: TokenItem[]; total: number } {
    const { rows, total } = tokensOfUser(this.db, userId, limit, offset);
    return { items: rows.map(toTokenItem), total };
  }

  /** Throws TokenNameTakenError when the owner already has a token of that name (any state). */
  issue(userId: string, name: string, expiresInHours: number, now = Date.now(), issuedVia: TokenOrigin = ""): IssuedToken {
    const expiresAt = expiresInHours > 0 ? sqlTime(now + expiresInHours * 3_600_000) : null;
    const { prefix, plaintext } = this.freshPlaintext();
    try {
      const id = insertToken(this.db, { userId, name, prefix, secretHash: sha256Hex(plaintext), expiresAt, createdAt: sqlTime(now), issuedVia });
      return { id, name, prefix, token: plaintext };
    } catch (err) {
      if (isNameConflict(err)) throw new TokenNameTakenError(name);
      throw err;
    }
  }

  /**
   * Replaces prefix and secret of an active token in place (same id, name, owner,
   * expiry), in one statement: the old plaintext and S3 key stop working the
   * moment the new ones exist. Undefined when the token is not active.
   */
  rotate(id: number, now = Date.now()): IssuedToken | undefined {
    const { prefix, plaintext } = this.freshPlaintext();
    const name = replaceTokenSecret(this.db, id, prefix, sha256Hex(plaintext), sqlTime(now));
    return name !== undefined ? { id, name, prefix, token: plaintext } : undefined;
  }

  /** True when this call revoked it; a second revoke keeps the first revoked_at. */
  revoke(id: number, now = Date.now()): boolean {
    return revokeToken(this.db, id, sqlTime(now));
  }

  /** The user's tokens that `via` issued, and the token `alsoId`: the ones this call revoked. */
  revokeIssuedVia(userId: string, via: TokenOrigin, alsoId: number, now = Date.now()): { id: number; name: string }[] {
    return revokeTokensIssuedVia(this.db, userId, via, alsoId, sqlTime(now));
  }

  /** How many tokens `via` issued to the user are still usable. */
  liveIssuedVia(userId: string, via: TokenOrigin, now = Date.now()): number {
    return liveTokensIssuedVia(this.db, userId, via, sqlTime(now));
  }

  delete(id: number): void {
    deleteToken(this.db, id);
  }

  /** Records use, but only when the stored time is older than the resolution. */
  touch(row: TokenRow, now = Date.now()): void {
    if (row.last_used_at && row.last_used_at > sqlTime(now - LAST_USED_RESOLUTION_MS)) return;
    setTokenLastUsed(this.db, row.id, sqlTime(now));
  }

  private freshPlaintext() {
    // 60 random bits make a collision practically impossible; checking costs one indexed read.
    for (;;) {
      const candidate = newTokenPlaintext();
      if (!this.byPrefix(candidate.prefix)) return candidate;
    }
  }
}

export interface TokenPrincipal {
  token: TokenRow;
  user: UserRow;
}

/** The token and its owner when the token is active (the owner may be disabled: callers decide). */
function activeToken(deps: TokenDeps, prefix: string, now: number): TokenPrincipal | undefined {
  const token = new TokenRepo(deps.db).byPrefix(prefix);
  if (!token || tokenState(token, now) !== "active") return undefined;
  const user = deps.users.byId(token.user_id);
  return user && { token, user };
}

const INVALID_TOKEN = "上传令牌无效、已过期或已吊销";
export const ACCOUNT_DISABLED = "该账号已被停用";

/**
 * Data-plane authentication (`Authorization: Bearer <token>`): 401 for a missing,
 * malformed, unknown, expired or revoked token; 403 when its owner is disabled or the
 * token lacks the upload scope. Admin endpoints never call this.
 */
export function authenticateUploadToken(deps: TokenDeps, request: Request, now = Date.now()): TokenPrincipal {
  const header = request.headers.get("authorization") ?? "";
  // No header at all is told apart from a wrong token: a client set up without its token (a PicGo
  // field left empty, a curl without -H) was told its token was revoked.
  if (header.trim() === "") throw new Unauthenticated("缺少上传令牌：请在 Authorization 头中以 Bearer <令牌> 发送", 'Bearer realm="kura"');
  const match = /^Bearer[ \t]+(\S+)[ \t]*$/i.exec(header);
  return authenticateUploadTokenText(deps, match?.[1] ?? "", now);
}

/**
 * The same checks for a token plaintext that arrived elsewhere (Chevereto's `key`
 * parameter, a Lsky client that sends the token without `Bearer `).
 */
export function authenticateUploadTokenText(deps: TokenDeps, plaintext: string, now = Date.now()): TokenPrincipal {
  const prefix = tokenPrefixOf(plaintext);
  const found = prefix ? activeToken(deps, prefix, now) : undefined;
  if (!found || !safeEqual(found.token.secret_hash, sha256Hex(plaintext))) throw new Unauthenticated(INVALID_TOKEN, 'Bearer realm="kura"');
  // The token is good; its account is stopped. Said as such (it read "invalid, expired or revoked"),
  // and the same answer an upload gets when the account is stopped while its body arrives.
  if (found.user.disabled) throw new Forbidden(ACCOUNT_DISABLED);
  if (!hasUploadScope(found.token)) {
    throw new Forbidden("上传令牌没有上传权限", 'Bearer realm="kura", error="insufficient_scope"');
  }
  new TokenRepo(deps.db).touch(found.token, now);
  return found;
}

/**
 * For the /s3/ surface: the token, owner and expected secret for an access key id,
 * or undefined when the token is unknown, revoked, expired or its owner disabled.
 * The caller verifies the signature, checks hasUploadScope, then calls TokenRepo.touch.
 */
export function resolveS3Credential(deps: TokenDeps, accessKeyId: string, now = Date.now()): (TokenPrincipal & { secret: string }) | undefined {
  if (!/^kura_[a-z2-7]{12}$/.test(accessKeyId)) return undefined;
  const found = activeToken(deps, accessKeyId, now);
  return found && !found.user.disabled ? { ...found, secret: s3SecretFor(deps.key, found.token) } : undefined;
}
