import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { sha256Hex } from "../../src/auth/secrets";
import { authenticateUploadToken, resolveS3Credential, s3SecretFor, TokenRepo, type TokenDeps } from "../../src/auth/tokens";
import { databasePath } from "../../src/boot";
import { loadMasterKey, MasterKey } from "../../src/config/master-key";
import { migrate, openDatabase } from "../../src/db/open";
import { parseSqlTime, sqlTime } from "../../src/db/time";
import { DomainError } from "../../src/errors";
import { ApiError, httpErrorOf } from "../../src/http/errors";
import { UserRepo } from "../../src/users/repo";
import { adminSession, expectError, Session } from "../helpers/client";
import { assertMatchesSpec } from "../helpers/openapi";
import { KuraServer } from "../helpers/server";

const PLAINTEXT = /^kura_[a-z2-7]{12}_[A-Za-z0-9_-]{43}$/;
const ITEM_KEYS = ["created_at", "expires_at", "id", "last_used_at", "name", "prefix", "revoked_at", "scopes"];

/** A data-plane request as the upload endpoints will receive it. */
const bearer = (header?: string) => new Request("http://127.0.0.1/api/upload", { method: "POST", headers: header ? { authorization: header } : {} });

/** HTTP-like status of authenticateUploadToken for one Authorization header. */
function authStatus(deps: TokenDeps, header?: string): number {
  try {
    authenticateUploadToken(deps, bearer(header));
    return 200;
  } catch (caught) {
    // Domain errors reach the client through the JSON surface's one mapping.
    const err = caught instanceof DomainError ? httpErrorOf(caught) : caught;
    if (!(err instanceof ApiError)) throw err;
    if (err.status === 401) expect(err.headers["www-authenticate"]).toStartWith("Bearer");
    expect(err.message).toMatch(/[\u4e00-\u9fff]/);
    return err.status;
  }
}

/** Reads a JSON response, checks it against openapi.yaml and that it must not be cached. */
async function noStoreJson(s: Session, method: string, path: string, status: number, body?: unknown) {
  const res = await s.request(method, path, body);
  const text = await res.text();
  if (res.status !== status) throw new Error(`${method} ${path}: expected ${status}, got ${res.status}: ${text}`);
  expect(res.headers.get("cache-control")).toBe("no-store");
  const parsed = JSON.parse(text);
  assertMatchesSpec(method, path, status, parsed);
  return parsed;
}

describe("upload tokens over HTTP", () => {
  const servers: KuraServer[] = [];
  let server: KuraServer;
  let admin: Session;
  let lockout: Response[];
  /** The server's own database and master key, opened from this process (WAL allows a second connection). */
  let live: TokenDeps;
  const users: Record<string, { s: Session; id: string }> = {};

  const openLive = () => {
    const db = openDatabase(databasePath(server.dataDir));
    live = { db, key: loadMasterKey(server.dataDir, process.env.KURA_MASTER_KEY)!, users: new UserRepo(db) };
  };
  const issue = (s: Session, body: unknown) => noStoreJson(s, "POST", "/api/admin/tokens", 201, body);
  const list = (s: Session, query = "") => s.json("GET", `/api/admin/tokens${query}`);
  const itemOf = async (s: Session, id: number, query = "") => (await list(s, `?page_size=100${query}`)).items.find((t: { id: number }) => t.id === id);
  const s3 = (s: Session, id: number) => noStoreJson(s, "POST", `/api/admin/tokens/${id}/s3-credential`, 200);

  beforeAll(async () => {
    server = await KuraServer.start();
    servers.push(server);
    // Only the built-in admin starts with the factory default password; probe before changing it.
    const fresh = new Session(server);
    await fresh.login("admin", server.defaultPassword());
    lockout = [await fresh.request("GET", "/api/admin/tokens"), await fresh.request("POST", "/api/admin/tokens", { name: "early" })];
    admin = await adminSession(server);
    for (const name of ["alice", "bob", "carol"]) {
      const u = await admin.json("POST", "/api/admin/users", { name, password: "password-1" }, 201);
      const s = new Session(server);
      expect((await s.login(name, "password-1")).status).toBe(200);
      users[name] = { s, id: u.id };
    }
    openLive();
  });
  afterAll(async () => {
    live?.db.close();
    for (const s of servers.reverse()) await s.dispose();
  });

  test("the factory default password locks token management (403)", async () => {
    for (const res of lockout) expect(await expectError(res, 403)).toContain("默认密码");
  });

  test("issue returns the plaintext once; only its hash is stored; the list never shows it", async () => {
    const { s, id } = users.alice!;
    const issued = await issue(s, { name: "  laptop  " });
    expect(issued.name).toBe("laptop");
    expect(issued.token).toMatch(PLAINTEXT);
    expect(issued.token.startsWith(`${issued.prefix}_`)).toBe(true);
    const row = live.db.query<Record<string, unknown>, [number]>("SELECT * FROM tokens WHERE id = ?").get(issued.id)!;
    expect(row.secret_hash).toBe(sha256Hex(issued.token));
    expect(JSON.stringify(row)).not.toContain(issued.token.slice(issued.prefix.length + 1));
    const page = await list(s);
    expect(JSON.stringify(page)).not.toContain(issued.token);
    const item = page.items.find((t: { id: number }) => t.id === issued.id);
    expect(Object.keys(item).sort()).toEqual(ITEM_KEYS);
    expect(item).toMatchObject({ name: "laptop", prefix: issued.prefix, scopes: "upload", expires_at: null, last_used_at: null, revoked_at: null });
    // The data plane accepts it, and the use shows up in the list.
    expect(authenticateUploadToken(live, bearer(`Bearer ${issued.token}`)).user.id).toBe(id);
    expect((await itemOf(s, issued.id)).last_used_at).toMatch(/^\d{4}-/);
    const timed = await issue(s, { name: "two-hours", expires_in_hours: 2 });
    const expires = parseSqlTime((await itemOf(s, timed.id)).expires_at).getTime();
    expect(Math.abs(expires - (Date.now() + 2 * 3_600_000))).toBeLessThan(10_000);
  });

  test("issue is strict: name 1..64 characters, expires_in_hours 0..876000", async () => {
    const { s } = users.alice!;
    const bad = [
      {},
      { name: "" },
      { name: "   " },
      { name: "x".repeat(65) },
      { name: "名".repeat(65) },
      { name: "tab\there" },
      { name: 5 },
      { name: "extra", scopes: "admin" },
      { name: "neg", expires_in_hours: -1 },
      { name: "big", expires_in_hours: 876_001 },
      { name: "frac", expires_in_hours: 1.5 },
      { name: "str", expires_in_hours: "5" },
    ];
    for (const body of bad) await expectError(await s.request("POST", "/api/admin/tokens", body), 400);
    await expectError(await s.request("POST", "/api/admin/tokens", "[]"), 400);
    expect((await issue(s, { name: "x".repeat(64), expires_in_hours: 0 })).name).toHaveLength(64);
    const wide = await issue(s, { name: "名".repeat(64), expires_in_hours: 876_000 });
    expect((await itemOf(s, wide.id)).expires_at).toMatch(/^21\d\d-/);
    const names = (await list(s, "?page_size=100")).items.map((t: { name: string }) => t.name);
    expect(names.filter((n: string) => ["extra", "neg", "big", "frac", "str"].includes(n))).toEqual([]);
  });

  test("names are unique per user (in any state until deleted), not across users", async () => {
    const a = await issue(users.alice!.s, { name: "dup" });
    expect(await expectError(await users.alice!.s.request("POST", "/api/admin/tokens", { name: "dup" }), 409)).toContain("同名");
    await issue(users.bob!.s, { name: "dup" });
    await users.alice!.s.json("POST", `/api/admin/tokens/${a.id}/revoke`, undefined, 204);
    await expectError(await users.alice!.s.request("POST", "/api/admin/tokens", { name: "dup" }), 409);
    await users.alice!.s.json("DELETE", `/api/admin/tokens/${a.id}`, undefined, 204);
    await issue(users.alice!.s, { name: "dup" });
  });

  test("list: own by default, newest first, paginated; user_id is admin-only", async () => {
    const { s, id } = users.carol!;
    for (let i = 1; i <= 5; i++) await issue(s, { name: `c${i}` });
    const first = await list(s, "?page=1&page_size=2");
    expect(first.total).toBe(5);
    expect(first.items.map((t: { name: string }) => t.name)).toEqual(["c5", "c4"]);
    expect((await list(s, "?page=3&page_size=2")).items.map((t: { name: string }) => t.name)).toEqual(["c1"]);
    expect((await list(s, "?page=4&page_size=2")).items).toEqual([]);
    expect((await list(s, "?page_size=1000")).items).toHaveLength(5);
    await expectError(await s.request("GET", "/api/admin/tokens?page=0"), 400);
    await expectError(await s.request("GET", "/api/admin/tokens?page_size=x"), 400);
    expect((await list(s, `?user_id=${id}`)).total).toBe(5);
    expect(await expectError(await s.request("GET", `/api/admin/tokens?user_id=${users.alice!.id}`), 403)).toContain("管理员");
    expect((await list(users.alice!.s)).items.some((t: { name: string }) => /^c\d$/.test(t.name))).toBe(false);
    const viaAdmin = await list(admin, `?user_id=${id}&page_size=3`);
    expect([viaAdmin.total, viaAdmin.items.length]).toEqual([5, 3]);
    expect((await list(admin)).items.some((t: { name: string }) => /^c\d$/.test(t.name))).toBe(false);
    await expectError(await admin.request("GET", "/api/admin/tokens?user_id=nobody"), 404);
  });

  test("a bearer token never authenticates an admin endpoint (401)", async () => {
    const { token } = await issue(users.alice!.s, { name: "not-admin" });
    for (const method of ["GET", "POST"]) {
      const res = await fetch(server.url("/api/admin/tokens"), {
        method,
        headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
        body: method === "POST" ? JSON.stringify({ name: "via-bearer" }) : undefined,
      });
      await expectError(res, 401);
    }
  });

  test("every state change needs the CSRF token (403)", async () => {
    const { s } = users.alice!;
    const t = await issue(s, { name: "csrf" });
    for (const csrf of ["", "wrong"]) {
      await expectError(await s.request("POST", "/api/admin/tokens", { name: "csrf-2" }, { "x-csrf-token": csrf }), 403);
      for (const action of ["revoke", "rotate", "s3-credential"]) {
        await expectError(await s.request("POST", `/api/admin/tokens/${t.id}/${action}`, undefined, { "x-csrf-token": csrf }), 403);
      }
      await expectError(await s.request("DELETE", `/api/admin/tokens/${t.id}`, undefined, { "x-csrf-token": csrf }), 403);
    }
    expect(authStatus(live, `Bearer ${t.token}`)).toBe(200);
    expect((await list(s, "?page_size=100")).items.some((i: { name: string }) => i.name === "csrf-2")).toBe(false);
  });

  test("revoke stops bearer and S3 at once, is idempotent; delete needs revoke first", async () => {
    const { s } = users.alice!;
    const t = await issue(s, { name: "to-revoke" });
    const cred = await s3(s, t.id);
    expect(resolveS3Credential(live, t.prefix)?.secret).toBe(cred.secret_access_key);
    expect(await expectError(await s.request("DELETE", `/api/admin/tokens/${t.id}`), 409)).toContain("请先吊销");
    await s.json("POST", `/api/admin/tokens/${t.id}/revoke`, undefined, 204);
    expect(authStatus(live, `Bearer ${t.token}`)).toBe(401);
    expect(resolveS3Credential(live, t.prefix)).toBeUndefined();
    await expectError(await s.request("POST", `/api/admin/tokens/${t.id}/s3-credential`), 409);
    expect(await expectError(await s.request("POST", `/api/admin/tokens/${t.id}/rotate`), 409)).toContain("只能轮换有效的令牌");
    // Backdate the first revocation instead of waiting a second, then revoke again.
    live.db.query("UPDATE tokens SET revoked_at = '2001-02-03 04:05:06' WHERE id = ?").run(t.id);
    await s.json("POST", `/api/admin/tokens/${t.id}/revoke`, undefined, 204);
    expect((await itemOf(s, t.id)).revoked_at).toBe("2001-02-03 04:05:06");
    await s.json("DELETE", `/api/admin/tokens/${t.id}`, undefined, 204);
    expect(await itemOf(s, t.id)).toBeUndefined();
    await expectError(await s.request("DELETE", `/api/admin/tokens/${t.id}`), 404);
    await expectError(await s.request("POST", `/api/admin/tokens/${t.id}/revoke`), 404);
  });

  test("an expired token is refused everywhere and can be deleted without revoking", async () => {
    const { s } = users.alice!;
    const t = await issue(s, { name: "short-lived", expires_in_hours: 1 });
    // An hour is too long to wait: move expires_at into the past in the server's own database.
    live.db.query("UPDATE tokens SET expires_at = ? WHERE id = ?").run(sqlTime(Date.now() - 1000), t.id);
    expect(authStatus(live, `Bearer ${t.token}`)).toBe(401);
    expect(resolveS3Credential(live, t.prefix)).toBeUndefined();
    await expectError(await s.request("POST", `/api/admin/tokens/${t.id}/s3-credential`), 409);
    await expectError(await s.request("POST", `/api/admin/tokens/${t.id}/rotate`), 409);
    await s.json("DELETE", `/api/admin/tokens/${t.id}`, undefined, 204);
  });

  test("rotate replaces plaintext, prefix and S3 secret in place; the old ones die at once", async () => {
    const { s } = users.alice!;
    const t = await issue(s, { name: "rot", expires_in_hours: 5 });
    const before = await itemOf(s, t.id);
    const oldCred = await s3(s, t.id);
    expect(authStatus(live, `Bearer ${t.token}`)).toBe(200);
    const r = await noStoreJson(s, "POST", `/api/admin/tokens/${t.id}/rotate`, 200);
    expect([r.id, r.name]).toEqual([t.id, "rot"]);
    expect(r.prefix).not.toBe(t.prefix);
    expect(r.token).toMatch(PLAINTEXT);
    expect(authStatus(live, `Bearer ${t.token}`)).toBe(401);
    expect(resolveS3Credential(live, t.prefix)).toBeUndefined();
    const after = await itemOf(s, t.id);
    expect(after).toMatchObject({ name: "rot", prefix: r.prefix, last_used_at: null, expires_at: before.expires_at, revoked_at: null });
    expect(authStatus(live, `Bearer ${r.token}`)).toBe(200);
    const newCred = await s3(s, t.id);
    expect(newCred.access_key_id).toBe(r.prefix);
    expect(newCred.secret_access_key).not.toBe(oldCred.secret_access_key);
    expect(resolveS3Credential(live, r.prefix)?.secret).toBe(newCred.secret_access_key);
  });

  test("others' tokens: invisible to regular users; admin may list, revoke, delete but not rotate or read S3", async () => {
    const alice = users.alice!;
    const t = await issue(alice.s, { name: "owned" });
    for (const [method, path] of [
      ["POST", `/api/admin/tokens/${t.id}/revoke`],
      ["POST", `/api/admin/tokens/${t.id}/rotate`],
      ["POST", `/api/admin/tokens/${t.id}/s3-credential`],
      ["DELETE", `/api/admin/tokens/${t.id}`],
    ] as const) {
      await expectError(await users.bob!.s.request(method, path), 404);
      if (method === "POST" && !path.endsWith("revoke")) await expectError(await admin.request(method, path), 404);
    }
    expect(authStatus(live, `Bearer ${t.token}`)).toBe(200);
    expect((await itemOf(admin, t.id, `&user_id=${alice.id}`)).name).toBe("owned");
    await expectError(await admin.request("DELETE", `/api/admin/tokens/${t.id}`), 409);
    await admin.json("POST", `/api/admin/tokens/${t.id}/revoke`, undefined, 204);
    expect(authStatus(live, `Bearer ${t.token}`)).toBe(401);
    await admin.json("DELETE", `/api/admin/tokens/${t.id}`, undefined, 204);
    expect(await itemOf(alice.s, t.id)).toBeUndefined();
    for (const id of ["999999", "abc", "-1"]) await expectError(await alice.s.request("POST", `/api/admin/tokens/${id}/revoke`), 404);
  });

  test("S3 credential: fields, origin from base_url, stable across reads", async () => {
    const { s, id } = users.alice!;
    const t = await issue(s, { name: "s3" });
    const a = await s3(s, t.id);
    expect(a).toEqual({
      access_key_id: t.prefix,
      secret_access_key: a.secret_access_key,
      endpoint: server.url("/s3"),
      region: "us-east-1",
      bucket: "kura",
      url_prefix: server.url(`/o/${id}/`),
    });
    expect(a.secret_access_key).toHaveLength(40);
    expect(await s3(s, t.id)).toEqual(a);
    await admin.json("PUT", "/api/admin/config", { base_url: "https://img.example.com" });
    const b = await s3(s, t.id);
    await admin.json("PUT", "/api/admin/config", { base_url: "" });
    expect([b.endpoint, b.url_prefix, b.secret_access_key]).toEqual(["https://img.example.com/s3", `https://img.example.com/o/${id}/`, a.secret_access_key]);
  });

  test("every token action is audited, with the token id and no secret", async () => {
    const rows = live.db
      .query<{ action: string; target: string; detail: string }, []>("SELECT action, target, detail FROM audit WHERE action LIKE 'token.%'")
      .all();
    for (const action of ["token.create", "token.revoke", "token.rotate", "token.delete", "token.s3_credential"]) {
      expect(rows.some((r) => r.action === action && /^\d+$/.test(r.target))).toBe(true);
    }
    expect(rows.some((r) => /kura_|secret|token"/.test(r.detail))).toBe(false);
  });

  test("the S3 secret and the plaintext survive a restart", async () => {
    const alice = users.alice!;
    const t = await issue(alice.s, { name: "durable" });
    const cred = await s3(alice.s, t.id);
    live.db.close();
    await server.stop();
    server = await KuraServer.start({ dataDir: server.dataDir });
    servers.push(server);
    openLive();
    const s = new Session(server);
    expect((await s.login("alice", "password-1")).status).toBe(200);
    expect(await s3(s, t.id)).toEqual({ ...cred, endpoint: server.url("/s3"), url_prefix: server.url(`/o/${alice.id}/`) });
    expect(resolveS3Credential(live, t.prefix)?.secret).toBe(cred.secret_access_key);
    expect(authStatus(live, `Bearer ${t.token}`)).toBe(200);
  });
});

describe("authenticateUploadToken and resolveS3Credential on a real migrated database", () => {
  const dir = mkdtempSync(join(tmpdir(), "kura-tokens-"));
  const db = openDatabase(join(dir, "unit.db"));
  migrate(db);
  const deps: TokenDeps = { db, key: MasterKey.generate().key, users: new UserRepo(db) };
  const repo = new TokenRepo(db);
  deps.users.insert({
    id: "u1",
    name: "u1",
    role: "user",
    password_hash: "x",
    must_change_password: 0,
    quota_bytes: null,
    default_ttl_hours: null,
    disabled: 0,
  });
  afterAll(() => {
    db.close();
    rmSync(dir, { recursive: true, force: true });
  });
  const row = (id: number) => repo.byId(id)!;

  test("only a well-formed, known bearer token with the right secret passes", () => {
    const t = repo.issue("u1", "a", 0);
    expect(authenticateUploadToken(deps, bearer(`Bearer ${t.token}`))).toMatchObject({ token: { id: t.id }, user: { id: "u1" } });
    expect(authStatus(deps, `bearer  ${t.token}`)).toBe(200); // the scheme is case-insensitive
    const last = t.token.at(-1) === "A" ? "B" : "A";
    const other = repo.issue("u1", "b", 0);
    for (const header of [
      undefined,
      "",
      "Bearer",
      `Basic ${t.token}`,
      `Bearer ${t.token}x`,
      `Bearer ${t.token.slice(0, -1)}${last}`,
      `Bearer ${t.prefix}_${other.token.slice(other.prefix.length + 1)}`,
      `Bearer kura_aaaaaaaaaaaa_${"A".repeat(43)}`,
      `Bearer ${t.token} extra`,
    ]) {
      expect(authStatus(deps, header)).toBe(401);
    }
  });

  test("expired or revoked gives 401; a disabled owner or a token without upload scope gives 403", () => {
    const t = repo.issue("u1", "states", 1);
    db.query("UPDATE tokens SET expires_at = ? WHERE id = ?").run(sqlTime(Date.now() - 1000), t.id);
    expect(authStatus(deps, `Bearer ${t.token}`)).toBe(401);
    db.query("UPDATE tokens SET expires_at = ? WHERE id = ?").run(sqlTime(Date.now() + 60_000), t.id);
    expect(authStatus(deps, `Bearer ${t.token}`)).toBe(200);
    db.query("UPDATE users SET disabled = 1 WHERE id = 'u1'").run();
    // Said as what it is (the token is good, the account stopped) only to whoever holds the secret.
    expect(authStatus(deps, `Bearer ${t.token}`)).toBe(403);
    expect(authStatus(deps, `Bearer ${t.token.slice(0, -1)}${t.token.at(-1) === "A" ? "B" : "A"}`)).toBe(401);
    expect(resolveS3Credential(deps, t.prefix)).toBeUndefined();
    db.query("UPDATE users SET disabled = 0 WHERE id = 'u1'").run();
    db.query("UPDATE tokens SET scopes = 'read' WHERE id = ?").run(t.id);
    expect(authStatus(deps, `Bearer ${t.token}`)).toBe(403);
    db.query("UPDATE tokens SET scopes = 'read upload' WHERE id = ?").run(t.id);
    expect(authStatus(deps, `Bearer ${t.token}`)).toBe(200);
    expect(repo.revoke(t.id)).toBe(true);
    expect(repo.revoke(t.id)).toBe(false);
    expect(authStatus(deps, `Bearer ${t.token}`)).toBe(401);
  });

  test("last_used_at is written at most once a minute", () => {
    const t = repo.issue("u1", "usage", 0);
    expect(row(t.id).last_used_at).toBeNull();
    authenticateUploadToken(deps, bearer(`Bearer ${t.token}`));
    expect(Math.abs(parseSqlTime(row(t.id).last_used_at!).getTime() - Date.now())).toBeLessThan(3000);
    const recent = sqlTime(Date.now() - 30_000);
    db.query("UPDATE tokens SET last_used_at = ? WHERE id = ?").run(recent, t.id);
    authenticateUploadToken(deps, bearer(`Bearer ${t.token}`));
    expect(row(t.id).last_used_at).toBe(recent);
    db.query("UPDATE tokens SET last_used_at = ? WHERE id = ?").run(sqlTime(Date.now() - 120_000), t.id);
    authenticateUploadToken(deps, bearer(`Bearer ${t.token}`));
    expect(row(t.id).last_used_at! >= sqlTime(Date.now() - 3000)).toBe(true);
  });

  test("S3 secret: stable, bound to master key and prefix, gone after rotate or revoke", () => {
    const t = repo.issue("u1", "s3", 0);
    const first = resolveS3Credential(deps, t.prefix)!;
    expect(first).toMatchObject({ token: { id: t.id }, user: { id: "u1" } });
    expect(first.secret).toHaveLength(40);
    expect(resolveS3Credential(deps, t.prefix)!.secret).toBe(first.secret);
    expect(s3SecretFor(MasterKey.generate().key, row(t.id))).not.toBe(first.secret);
    for (const id of ["AKIAIOSFODNN7EXAMPLE", "kura_aaaaaaaaaaaa", ""]) expect(resolveS3Credential(deps, id)).toBeUndefined();
    const rotated = repo.rotate(t.id)!;
    expect([rotated.id, rotated.name]).toEqual([t.id, "s3"]);
    expect(resolveS3Credential(deps, t.prefix)).toBeUndefined();
    expect(resolveS3Credential(deps, rotated.prefix)!.secret).not.toBe(first.secret);
    repo.revoke(t.id);
    expect(resolveS3Credential(deps, rotated.prefix)).toBeUndefined();
    // Rotation re-checks the state itself, so it cannot resurrect a revoked token.
    expect(repo.rotate(t.id)).toBeUndefined();
    expect(row(t.id).prefix).toBe(rotated.prefix);
  });
});
