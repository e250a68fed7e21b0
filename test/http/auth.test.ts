import { Database } from "bun:sqlite";
import { describe, expect, test } from "bun:test";
import { join } from "node:path";
import { adminSession, expectError, Session } from "../helpers/client";
import { useAdmin, useServer } from "../helpers/fixture";
import { KuraServer, runCli } from "../helpers/server";

describe("sessions and the default password", () => {
  const { server } = useServer();

  test("factory default password is logged once and locks every other admin endpoint", async () => {
    expect(server.logs.match(/password=/g)?.length).toBe(1);
    const s = new Session(server);
    const res = await s.login("admin", server.defaultPassword());
    expect(res.status).toBe(200);
    const body = await res.json();
    expect(body.user).toEqual({ id: "default", name: "admin", role: "admin", must_change_password: true });
    expect(typeof body.csrf_token).toBe("string");

    expect(await expectError(await s.request("GET", "/api/admin/users"), 403)).toContain("默认密码");
    expect(await expectError(await s.request("GET", "/api/admin/config"), 403)).toContain("默认密码");
    expect(await expectError(await s.request("POST", "/api/admin/users", { name: "x", password: "12345678" }), 403)).toContain("默认密码");
    const me = await s.json("GET", "/api/admin/me");
    expect(me.csrf_token).toBe(body.csrf_token);
    expect(me.user.must_change_password).toBe(true);

    await s.json("PUT", "/api/admin/me/password", { old_password: server.defaultPassword(), new_password: "changed-pass-1" }, 204);
    // The session that changed the password is gone too: log in again.
    await expectError(await s.request("GET", "/api/admin/me"), 401);
    expect((await s.login("admin", "changed-pass-1")).status).toBe(200);
    const after = await s.json("GET", "/api/admin/me");
    expect(after.user.must_change_password).toBe(false);
    await s.json("GET", "/api/admin/users");
  });

  test("wrong credentials are 401 and do not reveal which part was wrong", async () => {
    const s = new Session(server, { "x-forwarded-for": "203.0.113.9" });
    const a = await expectError(await s.login("admin", "nope-nope"), 401);
    const b = await expectError(await s.login("no-such-user", "nope-nope"), 401);
    expect(a).toBe(b);
    // Each one logged for fail2ban or CrowdSec: who tried which name from where (an untrusted
    // X-Forwarded-For is not the client), never the password.
    expect(server.logs).toMatch(/level=WARN msg=登录失败 client=127\.0\.0\.1 user=admin via=console\n/);
    expect(server.logs).toMatch(/level=WARN msg=登录失败 client=127\.0\.0\.1 user=no-such-user via=console\n/);
    expect(server.logs).not.toContain("nope-nope");
  });

  test("malformed and incomplete login bodies are 400, never 500", async () => {
    const res = await fetch(server.url("/api/admin/auth/login"), {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: '{"name": "admin", ',
    });
    await expectError(res, 400);
    await expectError(await new Session(server).request("POST", "/api/admin/auth/login", { name: "admin" }), 400);
    await expectError(await new Session(server).request("POST", "/api/admin/auth/login", [1, 2]), 400);
  });
});

describe("CSRF, cookies and invalidation", () => {
  const { server, admin } = useAdmin();

  test("state-changing admin requests need the session's CSRF token", async () => {
    const body = { name: "csrf-user", password: "password-1" };
    expect(await expectError(await admin.request("POST", "/api/admin/users", body, { "x-csrf-token": "" }), 403)).toContain("CSRF");
    await expectError(await admin.request("POST", "/api/admin/users", body, { "x-csrf-token": "forged" }), 403);
    // A token from another session of the same user does not fit either.
    const other = new Session(server);
    await other.login("admin", "admin-password-1");
    await expectError(await admin.request("POST", "/api/admin/users", body, { "x-csrf-token": other.csrf }), 403);
    await admin.json("POST", "/api/admin/users", body, 201);
    // GET needs no token.
    await admin.json("GET", "/api/admin/users");
  });

  test("cookie is HttpOnly, SameSite=Lax, 30 days, and not Secure over plain HTTP", async () => {
    const res = await new Session(server).login("admin", "admin-password-1");
    const cookie = res.headers.get("set-cookie")!;
    expect(cookie).toMatch(/^kura_session=[A-Za-z0-9_-]{20,};/);
    expect(cookie).toContain("HttpOnly");
    expect(cookie).toContain("SameSite=Lax");
    expect(cookie).toContain(`Max-Age=${30 * 86400}`);
    expect(cookie).not.toContain("Secure");
    // X-Forwarded-Proto from an untrusted peer is ignored.
    const spoofed = await new Session(server, { "x-forwarded-proto": "https" }).login("admin", "admin-password-1");
    expect(spoofed.headers.get("set-cookie")).not.toContain("Secure");
  });

  test("sessions are stored only as hashes and passwords as argon2id", async () => {
    const db = new Database(join(server.dataDir, "kura.db"), { readonly: true });
    const token = admin.cookie.split("=")[1]!;
    const rows = db.query<{ id_hash: string }, []>("SELECT id_hash FROM sessions").all();
    expect(rows.length).toBeGreaterThan(0);
    expect(rows.some((r) => r.id_hash.includes(token))).toBe(false);
    expect(rows.some((r) => r.id_hash === new Bun.CryptoHasher("sha256").update(token).digest("hex"))).toBe(true);
    const hashes = db.query<{ password_hash: string }, []>("SELECT password_hash FROM users").all();
    for (const h of hashes) expect(h.password_hash.startsWith("$argon2id$")).toBe(true);
    db.close();
    // The suite's servers hash at argon2id's least work (the real cost: http/hardening-login.test.ts), and say so.
    expect(server.logs).toMatch(/level=WARN msg="?仅供测试：KURA_TEST_PASSWORD_COST=low/);
  });

  test("a password change ends every session of that user, an admin reset too", async () => {
    await admin.json("POST", "/api/admin/users", { name: "alice", password: "alice-pass-1" }, 201);
    const a1 = new Session(server);
    const a2 = new Session(server);
    await a1.login("alice", "alice-pass-1");
    await a2.login("alice", "alice-pass-1");
    await a1.json("PUT", "/api/admin/me/password", { old_password: "alice-pass-1", new_password: "alice-pass-2" }, 204);
    await expectError(await a1.request("GET", "/api/admin/me"), 401);
    await expectError(await a2.request("GET", "/api/admin/me"), 401);
    // Wrong old password is refused and changes nothing.
    await a1.login("alice", "alice-pass-2");
    await expectError(await a1.request("PUT", "/api/admin/me/password", { old_password: "bad-old-pass", new_password: "alice-pass-3" }), 400);
    // The refusal says what a password needs.
    expect(await expectError(await a1.request("PUT", "/api/admin/me/password", { old_password: "alice-pass-2", new_password: "short" }), 400)).toBe(
      "字段 new_password 的值无效：至少 8 个字符",
    );
    await a1.json("GET", "/api/admin/me");
    // An admin reset ends alice's sessions as well.
    const users = await admin.json("GET", "/api/admin/users");
    const alice = users.items.find((u: { name: string }) => u.name === "alice");
    await admin.json("POST", `/api/admin/users/${alice.id}/password`, { password: "alice-pass-4" }, 204);
    await expectError(await a1.request("GET", "/api/admin/me"), 401);
    expect((await new Session(server).login("alice", "alice-pass-4")).status).toBe(200);
    // Admin's own session is untouched.
    await admin.json("GET", "/api/admin/me");
  });

  test("logout deletes the session, clears the cookie and is idempotent", async () => {
    const s = new Session(server);
    await s.login("admin", "admin-password-1");
    const res = await s.request("POST", "/api/admin/auth/logout");
    expect(res.status).toBe(204);
    expect(res.headers.get("set-cookie")).toMatch(/^kura_session=;.*Max-Age=0/);
    await expectError(await s.request("GET", "/api/admin/me"), 401);
    expect((await s.request("POST", "/api/admin/auth/logout")).status).toBe(204);
  });

  test("regular users get 403 on admin-only endpoints and may read the config slice", async () => {
    await admin.json("POST", "/api/admin/users", { name: "bob", password: "bob-pass-1" }, 201);
    const bob = new Session(server);
    await bob.login("bob", "bob-pass-1");
    expect(await expectError(await bob.request("GET", "/api/admin/users"), 403)).toContain("管理员");
    await expectError(await bob.request("GET", "/api/admin/config/full"), 403);
    await expectError(await bob.request("PUT", "/api/admin/config", { max_upload_mb: 1 }), 403);
    const slice = await bob.json("GET", "/api/admin/config");
    expect(slice.build.version).toMatch(/^\d+\.\d+\.\d+/);
  });
});

describe("login rate limit", () => {
  test("too many attempts per address and name give 429 with Retry-After", async () => {
    const server = await KuraServer.start({ env: { KURA_TRUSTED_PROXIES: "127.0.0.1" } });
    try {
      const from = (ip: string) => new Session(server, { "x-forwarded-for": ip });
      for (let i = 0; i < 5; i++) await expectError(await from("198.51.100.1").login("admin", "wrong-password"), 401);
      const limited = await from("198.51.100.1").login("admin", "wrong-password");
      await expectError(limited.clone(), 429);
      expect(Number(limited.headers.get("retry-after"))).toBeGreaterThan(0);
      // Even the right password is refused while limited.
      await expectError(await from("198.51.100.1").login("admin", server.defaultPassword()), 429);
      // Another address, or another name from the same address, has its own bucket.
      expect((await from("198.51.100.2").login("admin", server.defaultPassword())).status).toBe(200);
      await expectError(await from("198.51.100.1").login("someone", "wrong-password"), 401);
    } finally {
      await server.dispose();
    }
  });

  test("the old password of a password change is throttled per account: a stolen session cannot guess it", async () => {
    const server = await KuraServer.start({ env: { KURA_TRUSTED_PROXIES: "127.0.0.1" } });
    try {
      const admin = await adminSession(server);
      await admin.json("POST", "/api/admin/users", { name: "carol", password: "carol-pass-1" }, 201);
      // Two sessions from two addresses: the budget belongs to the account, not to the client.
      const sessions = [new Session(server, { "x-forwarded-for": "198.51.100.7" }), new Session(server, { "x-forwarded-for": "2001:db8::7" })];
      for (const s of sessions) expect((await s.login("carol", "carol-pass-1")).status).toBe(200);
      const change = (s: Session, old: string) => s.request("PUT", "/api/admin/me/password", { old_password: old, new_password: "carol-pass-2" });
      for (let i = 0; i < 5; i++) expect(await expectError(await change(sessions[i % 2]!, `guess-${i}`), 400)).toBe("原密码错误");
      const limited = await change(sessions[1]!, "guess-5");
      expect(Number(limited.headers.get("retry-after"))).toBeGreaterThan(0);
      await expectError(limited, 429);
      // Even the right password waits now, and nothing changed.
      await expectError(await change(sessions[0]!, "carol-pass-1"), 429);
      expect((await new Session(server).login("carol", "carol-pass-1")).status).toBe(200);
      // Another account has its own budget.
      expect((await admin.request("PUT", "/api/admin/me/password", { old_password: "wrong", new_password: "admin-password-2" })).status).toBe(400);
    } finally {
      await server.dispose();
    }
  });

  test("Secure cookie behind a trusted proxy that reports HTTPS", async () => {
    const server = await KuraServer.start({ env: { KURA_TRUSTED_PROXIES: "127.0.0.0/8" } });
    try {
      const res = await new Session(server, { "x-forwarded-proto": "https" }).login("admin", server.defaultPassword());
      expect(res.headers.get("set-cookie")).toContain("Secure");
      const plain = await new Session(server, { "x-forwarded-proto": "http" }).login("admin", server.defaultPassword());
      expect(plain.headers.get("set-cookie")).not.toContain("Secure");
    } finally {
      await server.dispose();
    }
  });
});

describe("kura reset-password", () => {
  test("without a name it resets the built-in administrator under its current name, not an account that took the name admin", async () => {
    const server = await KuraServer.start();
    try {
      const admin = await adminSession(server);
      await admin.json("PUT", "/api/admin/users/default", { name: "boss", role: "admin", quota_bytes: null, default_ttl_hours: null, disabled: false });
      await admin.json("POST", "/api/admin/users", { name: "admin", password: "impostor-pass-1", role: "user" }, 201);
      await server.stop();
      const cli = await runCli(["reset-password"], { KURA_DATA_DIR: server.dataDir, KURA_LISTEN: "127.0.0.1:0" });
      expect(cli.code).toBe(0);
      const fresh = /user=boss password=(\S+)/.exec(cli.err)?.[1];
      expect(fresh).toBeTruthy();
      const again = await KuraServer.start({ dataDir: server.dataDir });
      try {
        expect((await new Session(again).login("admin", "impostor-pass-1")).status).toBe(200);
        expect((await new Session(again).login("boss", fresh!)).status).toBe(200);
      } finally {
        await again.stop();
      }
    } finally {
      await server.dispose();
    }
  });

  test("re-seeds and logs a new default password and ends the user's sessions", async () => {
    const server = await KuraServer.start();
    const admin = await adminSession(server);
    await server.stop();
    const cli = await runCli(["reset-password"], { KURA_DATA_DIR: server.dataDir, KURA_LISTEN: "127.0.0.1:0" });
    expect(cli.code).toBe(0);
    const fresh = /user=admin password=(\S+)/.exec(cli.err)?.[1];
    expect(fresh).toBeTruthy();
    const again = await KuraServer.start({ dataDir: server.dataDir });
    try {
      // The old cookie no longer works.
      const stale = new Session(again);
      stale.cookie = admin.cookie;
      await expectError(await stale.request("GET", "/api/admin/me"), 401);
      expect((await new Session(again).login("admin", "admin-password-1")).status).toBe(401);
      const s = new Session(again);
      const res = await s.login("admin", fresh!);
      expect((await res.json()).user.must_change_password).toBe(true);
      const missing = await runCli(["reset-password", "ghost"], { KURA_DATA_DIR: server.dataDir });
      expect(missing.code).not.toBe(0);
    } finally {
      await again.dispose();
      await server.dispose();
    }
  });
});
