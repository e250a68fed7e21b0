/**
 * Sessions, the admin guard and the password/secret helpers, in-process on a real migrated database
 * (fast enough to judge every mutant of `bun run mutate auth`): expiry boundaries, the guard's order
 * (401, CSRF, factory password, admin), cookie parsing, and constant-time comparison.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { hashPassword, MIN_PASSWORD_LENGTH, verifyPassword } from "../../src/auth/passwords";
import { randomReadable, randomToken, safeEqual, sha256Hex } from "../../src/auth/secrets";
import { SESSION_COOKIE, SESSION_DAYS, SessionStore } from "../../src/auth/sessions";
import { MasterKey } from "../../src/config/master-key";
import type { AppContext } from "../../src/context";
import { migrate, openDatabase } from "../../src/db/open";
import { sqlTime } from "../../src/db/time";
import { ApiError } from "../../src/http/errors";
import { authenticate, readCookie, type GuardOptions } from "../../src/http/guard";
import { UserRepo } from "../../src/users/repo";

const dir = mkdtempSync(join(tmpdir(), "kura-auth-unit-"));
const db = openDatabase(join(dir, "unit.db"));
migrate(db);
const key = MasterKey.generate().key;
const sessions = new SessionStore(db, key);
const users = new UserRepo(db);
const app = { sessions, users } as unknown as AppContext;
afterAll(() => {
  db.close();
  rmSync(dir, { recursive: true, force: true });
});

const base = { password_hash: "x", quota_bytes: null, default_ttl_hours: null };
users.insert({ id: "adm", name: "adm", role: "admin", must_change_password: 0, disabled: 0, ...base });
users.insert({ id: "usr", name: "usr", role: "user", must_change_password: 0, disabled: 0, ...base });
users.insert({ id: "new", name: "new", role: "admin", must_change_password: 1, disabled: 0, ...base });
users.insert({ id: "off", name: "off", role: "admin", must_change_password: 0, disabled: 1, ...base });

const T0 = Date.parse("2026-03-01T12:00:00Z");
const DAY = 86_400_000;

describe("sessions", () => {
  test("a session lasts exactly SESSION_DAYS, is stored only as a hash, and is not extended by use", () => {
    const { token, expiresAt } = sessions.create("usr", T0);
    expect(SESSION_DAYS).toBe(30);
    expect(expiresAt.getTime()).toBe(T0 + 30 * DAY);
    expect(token.length).toBeGreaterThanOrEqual(43);
    const row = db.query<{ id_hash: string; created_at: string; expires_at: string }, [string]>("SELECT * FROM sessions WHERE user_id = ?").get("usr")!;
    expect(row).toMatchObject({ id_hash: sha256Hex(token), created_at: sqlTime(T0), expires_at: sqlTime(T0 + 30 * DAY) });
    expect(sessions.lookup(token, T0)).toBe("usr");
    expect(sessions.lookup(token, T0 + 30 * DAY - 1000)).toBe("usr");
    expect(sessions.lookup(token, T0 + 30 * DAY)).toBeUndefined();
    expect(sessions.lookup(`${token}x`, T0)).toBeUndefined();
    expect(sessions.lookup(sha256Hex(token), T0)).toBeUndefined();
    sessions.delete(token);
    expect(sessions.lookup(token, T0)).toBeUndefined();
  });

  test("deleteAllForUser ends only that user's sessions; pruneExpired only the expired ones", () => {
    const a1 = sessions.create("adm", T0).token;
    const a2 = sessions.create("adm", T0).token;
    const u = sessions.create("usr", T0).token;
    const later = sessions.create("usr", T0 + 10 * DAY).token;
    expect(a1).not.toBe(a2);
    sessions.deleteAllForUser("adm");
    expect([sessions.lookup(a1, T0), sessions.lookup(a2, T0), sessions.lookup(u, T0)]).toEqual([undefined, undefined, "usr"]);
    sessions.pruneExpired(T0 + 30 * DAY - 1000);
    expect(db.query("SELECT 1 FROM sessions WHERE id_hash = ?").get(sha256Hex(u))).not.toBeNull();
    sessions.pruneExpired(T0 + 30 * DAY);
    expect(db.query("SELECT 1 FROM sessions WHERE id_hash = ?").get(sha256Hex(u))).toBeNull();
    expect(sessions.lookup(later, T0 + 30 * DAY)).toBe("usr");
  });

  test("the CSRF token is derived from the session: stable, distinct per session, never empty-accepting", () => {
    const a = sessions.create("usr").token;
    const b = sessions.create("usr").token;
    const csrf = sessions.csrfFor(a);
    expect(csrf).toBe(sessions.csrfFor(a));
    expect(csrf).toBe(key.derive("csrf", sha256Hex(a)).toString("base64url"));
    expect(csrf).not.toBe(sessions.csrfFor(b));
    expect(csrf).toMatch(/^[A-Za-z0-9_-]{20,}$/);
    expect(sessions.csrfMatches(a, csrf)).toBe(true);
    for (const wrong of [null, undefined, "", sessions.csrfFor(b), csrf.slice(0, -1), `${csrf}x`]) expect(sessions.csrfMatches(a, wrong)).toBe(false);
    expect(new SessionStore(db, MasterKey.generate().key).csrfFor(a)).not.toBe(csrf);
  });
});

describe("the admin guard", () => {
  const tokenFor = (user: string) => sessions.create(user).token;
  const request = (method: string, cookie?: string, csrf?: string) => {
    const headers: Record<string, string> = {};
    if (cookie !== undefined) headers.cookie = cookie;
    if (csrf !== undefined) headers["x-csrf-token"] = csrf;
    return new Request("http://kura.test/api/admin/x", { method, headers });
  };
  const outcome = (req: Request, opts?: GuardOptions): string => {
    try {
      return `ok:${authenticate(app, req, opts).user.id}`;
    } catch (err) {
      if (!(err instanceof ApiError)) throw err;
      return `${err.status}:${err.message}`;
    }
  };
  const CSRF = "403:CSRF 校验失败：缺少或错误的 X-CSRF-Token";
  const LOCK = "403:请先修改出厂默认密码，然后重新登录";
  const ADMIN = "403:需要管理员权限";

  test("401 without a valid session, for a disabled user, or an expired one", () => {
    const unauthorized = outcome(request("GET"));
    expect(unauthorized).toMatch(/^401:[\u4e00-\u9fff]/);
    expect(outcome(request("GET", `${SESSION_COOKIE}=nope`))).toBe(unauthorized);
    expect(outcome(request("GET", `other=${tokenFor("usr")}`))).toBe(unauthorized);
    expect(outcome(request("GET", `${SESSION_COOKIE}=${tokenFor("off")}`))).toBe(unauthorized);
    const old = sessions.create("usr", Date.now() - 31 * DAY).token;
    expect(outcome(request("GET", `${SESSION_COOKIE}=${old}`))).toBe(unauthorized);
    // Unauthenticated beats every other refusal.
    expect(outcome(request("POST", `${SESSION_COOKIE}=nope`), { admin: true })).toBe(unauthorized);
  });

  test("safe methods need no CSRF token; every other method needs the right one", () => {
    const t = tokenFor("usr");
    const cookie = `${SESSION_COOKIE}=${t}`;
    for (const m of ["GET", "HEAD", "OPTIONS"]) expect(outcome(request(m, cookie))).toBe("ok:usr");
    for (const m of ["POST", "PUT", "PATCH", "DELETE"]) {
      expect(outcome(request(m, cookie))).toBe(CSRF);
      expect(outcome(request(m, cookie, "wrong"))).toBe(CSRF);
      expect(outcome(request(m, cookie, sessions.csrfFor(tokenFor("usr"))))).toBe(CSRF);
      expect(outcome(request(m, cookie, sessions.csrfFor(t)))).toBe("ok:usr");
    }
  });

  test("order: CSRF, then the factory-password lock (unless allowed), then admin-only", () => {
    const n = tokenFor("new");
    const cookie = `${SESSION_COOKIE}=${n}`;
    expect(outcome(request("POST", cookie))).toBe(CSRF);
    expect(outcome(request("POST", cookie, sessions.csrfFor(n)))).toBe(LOCK);
    expect(outcome(request("GET", cookie))).toBe(LOCK);
    expect(outcome(request("POST", cookie, sessions.csrfFor(n)), { allowDefaultPassword: true })).toBe("ok:new");
    expect(outcome(request("POST", cookie, sessions.csrfFor(n)), { allowDefaultPassword: false })).toBe(LOCK);
    const u = tokenFor("usr");
    expect(outcome(request("GET", `${SESSION_COOKIE}=${u}`), { admin: true })).toBe(ADMIN);
    expect(outcome(request("GET", `${SESSION_COOKIE}=${u}`), { admin: false })).toBe("ok:usr");
    expect(outcome(request("GET", `${SESSION_COOKIE}=${tokenFor("adm")}`), { admin: true })).toBe("ok:adm");
    expect(outcome(request("GET", cookie), { admin: true, allowDefaultPassword: true })).toBe("ok:new");
  });

  test("the session cookie is found among others and percent-decoded", () => {
    const t = tokenFor("adm");
    const req = (cookie: string) => new Request("http://kura.test/", { headers: { cookie } });
    expect(readCookie(req(`a=1; ${SESSION_COOKIE}=${t}; b=2`), SESSION_COOKIE)).toBe(t);
    expect(readCookie(req(`  ${SESSION_COOKIE} =  ${t}  `), SESSION_COOKIE)).toBe(t);
    expect(readCookie(req(`x=a%20b%3Bc`), "x")).toBe("a b;c");
    expect(readCookie(req(`novalue; x=1=2`), "x")).toBe("1=2");
    expect(readCookie(req(`xx=1`), "x")).toBeUndefined();
    expect(readCookie(req(`${SESSION_COOKIE}_old=1`), SESSION_COOKIE)).toBeUndefined();
    expect(readCookie(new Request("http://kura.test/"), SESSION_COOKIE)).toBeUndefined();
    expect(readCookie(req(`=1; x=2`), "")).toBe("1");
  });
});

describe("passwords and secrets", () => {
  test("argon2id hashes verify the right password only; an unknown user costs a verify and fails", async () => {
    expect(MIN_PASSWORD_LENGTH).toBe(8);
    const hash = await hashPassword("correct horse");
    expect(hash).toStartWith("$argon2id$");
    expect(await verifyPassword("correct horse", hash)).toBe(true);
    expect(await verifyPassword("correct horsE", hash)).toBe(false);
    expect(await verifyPassword("kura-no-such-user", undefined)).toBe(false);
    expect(await verifyPassword("anything", undefined)).toBe(false);
  });

  test("safeEqual compares whole strings; random tokens and readable passwords have their alphabet and length", () => {
    expect(safeEqual("abc", "abc")).toBe(true);
    for (const [a, b] of [
      ["abc", "abd"],
      ["abc", "ab"],
      ["ab", "abc"],
      ["", "a"],
    ])
      expect(safeEqual(a!, b!)).toBe(false);
    expect(safeEqual("", "")).toBe(true);
    expect(randomToken()).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(randomToken(12)).toMatch(/^[A-Za-z0-9_-]{16}$/);
    expect(randomToken()).not.toBe(randomToken());
    const readable = Array.from({ length: 50 }, () => randomReadable(24));
    for (const r of readable) expect(r).toMatch(/^[A-HJ-NP-Za-km-z2-9]{24}$/);
    expect(new Set(readable).size).toBe(50);
    expect(randomReadable(0)).toBe("");
    expect(randomReadable(500)).toHaveLength(500);
    expect(sha256Hex("abc")).toBe("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  });
});
