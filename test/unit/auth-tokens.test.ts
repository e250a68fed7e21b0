/**
 * Upload tokens in-process on a real migrated database (fast enough to judge every mutant of
 * `bun run mutate tokens`): the plaintext's exact shape, the Authorization header's exact shape,
 * the S3 access key's exact shape, and the second a token expires.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { createHmac } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  authenticateUploadToken,
  authenticateUploadTokenText,
  newTokenPlaintext,
  LAST_USED_RESOLUTION_MS,
  resolveS3Credential,
  s3SecretFor,
  type TokenDeps,
  TokenRepo,
  tokenPrefixOf,
  TokenNameTakenError,
  tokenState,
} from "../../src/auth/tokens";
import { MasterKey } from "../../src/config/master-key";
import { migrate, openDatabase } from "../../src/db/open";
import { Forbidden, Unauthenticated } from "../../src/errors";
import { UserRepo } from "../../src/users/repo";

const dir = mkdtempSync(join(tmpdir(), "kura-tokens-unit-"));
const db = openDatabase(join(dir, "unit.db"));
migrate(db);
const users = new UserRepo(db);
const deps = { db, key: MasterKey.generate().key, users } as unknown as TokenDeps;
const repo = new TokenRepo(db);
afterAll(() => {
  db.close();
  rmSync(dir, { recursive: true, force: true });
});
users.insert({ id: "u1", name: "u1", role: "user", must_change_password: 0, disabled: 0, password_hash: "x", quota_bytes: null, default_ttl_hours: null });

const T0 = Date.parse("2026-03-01T12:00:00Z");
const HOUR = 3_600_000;
const issued = repo.issue("u1", "cli", 24, T0);

/** The status a data-plane call answers with (200 when it authenticates). */
function statusOf(call: () => unknown): number {
  try {
    call();
    return 200;
  } catch (err) {
    if (err instanceof Unauthenticated) return 401;
    if (err instanceof Forbidden) return 403;
    throw err;
  }
}
const withHeader = (value: string) => new Request("http://kura.test/api/upload", { headers: { authorization: value } });

describe("the token plaintext", () => {
  test("a fresh plaintext has the shape its prefix is read from", () => {
    for (let i = 0; i < 50; i++) {
      const { prefix, plaintext } = newTokenPlaintext();
      expect(prefix).toMatch(/^kura_[a-z2-7]{12}$/);
      expect(tokenPrefixOf(plaintext)).toBe(prefix);
    }
  });

  test("anything around or inside the exact shape is refused, not trimmed", () => {
    const good = issued.token;
    expect(tokenPrefixOf(good)).toBe(issued.prefix);
    for (const bad of [
      `x${good}`, // text before the prefix
      `${good}x`, // a 44th secret character
      `${good}\n`,
      good.slice(0, -1), // 42 characters
      good.replace("kura_", "KURA_"),
      good.replace("kura_", "kura-"),
      `${good.slice(0, 5)}${good.slice(5, 17).toUpperCase()}${good.slice(17)}`, // upper-case id
      `${good.slice(0, 5)}0${good.slice(6)}`, // 0 is not base32
      `${good.slice(0, 17)}-${good.slice(18)}`, // no underscore between id and secret
      `${good.slice(0, -1)}+`, // + is not base64url
    ]) {
      expect({ bad, prefix: tokenPrefixOf(bad) }).toEqual({ bad, prefix: undefined });
    }
  });
});

describe("the Authorization header", () => {
  test("Bearer in any case, with spaces or tabs around the token, authenticates", () => {
    for (const value of [`Bearer ${issued.token}`, `bearer ${issued.token}`, `BEARER\t${issued.token}`, `Bearer   ${issued.token} \t`]) {
      expect({ value, status: statusOf(() => authenticateUploadToken(deps, withHeader(value), T0)) }).toEqual({ value, status: 200 });
    }
  });

  test("another scheme, text before Bearer, no space, or a second word is 401", () => {
    for (const value of [
      issued.token,
      `Basic ${issued.token}`,
      `XBearer ${issued.token}`,
      `Bearer${issued.token}`,
      `Bearer ${issued.token} extra`,
      `Bearer ${issued.token},`,
      "Bearer",
      "",
    ]) {
      expect({ value, status: statusOf(() => authenticateUploadToken(deps, withHeader(value), T0)) }).toEqual({ value, status: 401 });
    }
    expect(statusOf(() => authenticateUploadToken(deps, new Request("http://kura.test/"), T0))).toBe(401);
  });

  test("a refusal says why in Chinese and offers the Bearer challenge (RFC 6750), naming the scope when that is what is missing", () => {
    const refusal = (call: () => unknown) => {
      try {
        call();
      } catch (err) {
        return err as Unauthenticated | Forbidden;
      }
      throw new Error("not refused");
    };
    const missing = refusal(() => authenticateUploadToken(deps, withHeader("Basic x"), T0));
    expect(missing).toBeInstanceOf(Unauthenticated);
    expect({ message: missing.message, challenge: missing.challenge }).toEqual({ message: "上传令牌无效、已过期或已吊销", challenge: 'Bearer realm="kura"' });
    const t = repo.issue("u1", "read-only", 0, T0);
    db.run("UPDATE tokens SET scopes = 'read' WHERE id = ?", [t.id]);
    const scope = refusal(() => authenticateUploadTokenText(deps, t.token, T0));
    expect(scope).toBeInstanceOf(Forbidden);
    expect({ message: scope.message, challenge: scope.challenge }).toEqual({
      message: "上传令牌没有上传权限",
      challenge: 'Bearer realm="kura", error="insufficient_scope"',
    });
  });

  test("the right prefix with another secret is 401", () => {
    const forged = `${issued.prefix}_${"A".repeat(43)}`;
    expect(tokenPrefixOf(forged)).toBe(issued.prefix);
    expect(statusOf(() => authenticateUploadTokenText(deps, forged, T0))).toBe(401);
  });
});

describe("expiry", () => {
  test("a token is active up to the second before its expiry and expired from that second on", () => {
    const row = repo.byId(issued.id)!;
    expect(row.expires_at).toBe("2026-03-02 12:00:00");
    const expiry = T0 + 24 * HOUR;
    expect(tokenState(row, expiry - 1_000)).toBe("active");
    expect(tokenState(row, expiry - 1)).toBe("active"); // still 11:59:59 at whole seconds
    expect(tokenState(row, expiry)).toBe("expired");
    expect(tokenState(row, expiry + 1_000)).toBe("expired");
    expect(statusOf(() => authenticateUploadTokenText(deps, issued.token, expiry - 1_000))).toBe(200);
    expect(statusOf(() => authenticateUploadTokenText(deps, issued.token, expiry))).toBe(401);
    expect(resolveS3Credential(deps, issued.prefix, expiry - 1_000)?.token.id).toBe(issued.id);
    expect(resolveS3Credential(deps, issued.prefix, expiry)).toBeUndefined();
  });

  test("no expiry: active for ever; revoked wins over a future expiry", () => {
    const forever = repo.issue("u1", "forever", 0, T0);
    expect(repo.byId(forever.id)!.expires_at).toBeNull();
    expect(tokenState(repo.byId(forever.id)!, T0 + 100 * 365 * 24 * HOUR)).toBe("active");
    const revoked = repo.issue("u1", "revoked", 24, T0);
    expect(repo.revoke(revoked.id, T0 + HOUR)).toBe(true);
    expect(tokenState(repo.byId(revoked.id)!, T0 + 2 * HOUR)).toBe("revoked");
    expect(tokenState(repo.byId(revoked.id)!, T0 + 48 * HOUR)).toBe("revoked");
  });
});

describe("the S3 access key id", () => {
  test("exactly the prefix resolves; anything around it does not", () => {
    expect(resolveS3Credential(deps, issued.prefix, T0)?.token.id).toBe(issued.id);
    expect(resolveS3Credential(deps, issued.prefix, T0)?.secret).toMatch(/\S{20,}/);
    for (const bad of [`x${issued.prefix}`, `${issued.prefix}x`, `${issued.prefix}\n`, issued.prefix.toUpperCase(), issued.token]) {
      expect({ bad, found: resolveS3Credential(deps, bad, T0) }).toEqual({ bad, found: undefined });
    }
  });
});

describe("the token repository", () => {
  test("a second token of the same name is refused by name; other errors are not taken for it", () => {
    repo.issue("u1", "dup", 0, T0);
    expect(() => repo.issue("u1", "dup", 0, T0)).toThrow(TokenNameTakenError);
    expect(() => repo.issue("nobody", "x", 0, T0)).toThrow(/FOREIGN KEY/); // a missing owner is another error
  });

  test("rotation: same id, name and expiry, a new prefix and secret; the old plaintext and S3 key stop working", () => {
    const t = repo.issue("u1", "rotating", 24, T0);
    const oldSecret = resolveS3Credential(deps, t.prefix, T0)!.secret;
    const rotated = repo.rotate(t.id, T0 + HOUR)!;
    expect({ id: rotated.id, name: rotated.name }).toEqual({ id: t.id, name: "rotating" });
    expect(rotated.prefix).not.toBe(t.prefix);
    expect(tokenPrefixOf(rotated.token)).toBe(rotated.prefix);
    expect(repo.byId(t.id)!.expires_at).toBe("2026-03-02 12:00:00");
    expect(statusOf(() => authenticateUploadTokenText(deps, t.token, T0 + HOUR))).toBe(401);
    expect(statusOf(() => authenticateUploadTokenText(deps, rotated.token, T0 + HOUR))).toBe(200);
    expect(resolveS3Credential(deps, t.prefix, T0 + HOUR)).toBeUndefined();
    expect(resolveS3Credential(deps, rotated.prefix, T0 + HOUR)!.secret).not.toBe(oldSecret);
    // A revoked token cannot be rotated back to life.
    repo.revoke(t.id, T0 + 2 * HOUR);
    expect(repo.rotate(t.id, T0 + 3 * HOUR)).toBeUndefined();
    expect(repo.rotate(999_999, T0)).toBeUndefined();
  });

  test("the S3 secret stays what earlier versions derived: clients configured with it keep working after an upgrade", () => {
    const key = MasterKey.parse("11".repeat(32));
    const expected = createHmac("sha256", Buffer.alloc(32, 0x11)).update("s3-secret\u00007\u0000kura_abcdefghijkl").digest("base64url").slice(0, 40);
    expect(expected).toBe("iob0Eckfp3CISxXKoJnLPodRH9azpz8VEuM0CTiE"); // recorded 2026-11-28 from the released derivation
    expect(s3SecretFor(key, { id: 7, prefix: "kura_abcdefghijkl" })).toBe(expected);
  });

  test("the S3 secret is derived, stable, and differs per token", () => {
    const a = resolveS3Credential(deps, issued.prefix, T0)!.secret;
    expect(resolveS3Credential(deps, issued.prefix, T0)!.secret).toBe(a);
    expect(a).toHaveLength(40);
    expect(a).toMatch(/^[A-Za-z0-9_-]{40}$/);
    expect(s3SecretFor(deps.key, { id: issued.id, prefix: issued.prefix })).toBe(a);
    expect(s3SecretFor(deps.key, { id: issued.id + 1, prefix: issued.prefix })).not.toBe(a);
    expect(s3SecretFor(MasterKey.generate().key, { id: issued.id, prefix: issued.prefix })).not.toBe(a);
  });

  test("use is recorded at most once per resolution, and a list item carries no hash, owner or origin", () => {
    const t = repo.issue("u1", "touched", 0, T0);
    expect(repo.byId(t.id)!.last_used_at).toBeNull();
    authenticateUploadTokenText(deps, t.token, T0);
    expect(repo.byId(t.id)!.last_used_at).toBe("2026-03-01 12:00:00");
    authenticateUploadTokenText(deps, t.token, T0 + LAST_USED_RESOLUTION_MS - 1_000);
    expect(repo.byId(t.id)!.last_used_at).toBe("2026-03-01 12:00:00");
    authenticateUploadTokenText(deps, t.token, T0 + LAST_USED_RESOLUTION_MS);
    expect(repo.byId(t.id)!.last_used_at).toBe("2026-03-01 12:01:00");
    const item = repo.listForUser("u1", 500, 0).items.find((i) => i.id === t.id)!;
    expect(item).toMatchObject({ id: t.id, name: "touched", prefix: t.prefix, last_used_at: "2026-03-01 12:01:00" });
    for (const hidden of ["secret_hash", "user_id", "issued_via"]) expect(Object.keys(item)).not.toContain(hidden);
    expect(repo.listForUser("u1", 500, 0).total).toBe(repo.listForUser("u1", 500, 0).items.length);
    repo.delete(t.id);
    expect(repo.byId(t.id)).toBeUndefined();
  });

  test("a token without the upload scope is 403; so is a disabled owner's token (its S3 credential is gone)", () => {
    const t = repo.issue("u1", "scoped", 0, T0);
    for (const [scopes, status] of [
      ["upload", 200],
      ["read, upload", 200],
      ["read,,upload", 200],
      ["read  upload", 200],
      ["read", 403],
      ["uploads", 403],
      ["", 403],
    ] as const) {
      db.run("UPDATE tokens SET scopes = ? WHERE id = ?", [scopes, t.id]);
      expect({ scopes, status: statusOf(() => authenticateUploadTokenText(deps, t.token, T0)) }).toEqual({ scopes, status });
    }
    users.insert({ id: "u2", name: "u2", role: "user", must_change_password: 0, disabled: 1, password_hash: "x", quota_bytes: null, default_ttl_hours: null });
    const off = repo.issue("u2", "off", 0, T0);
    expect(statusOf(() => authenticateUploadTokenText(deps, off.token, T0))).toBe(403);
    expect(resolveS3Credential(deps, off.prefix, T0)).toBeUndefined();
  });
});
