import { describe, expect, test } from "bun:test";
import { expectError, Session } from "../helpers/client";
import { useAdmin } from "../helpers/fixture";
import { form, makePng } from "../helpers/images";

describe("users", () => {
  const { server, admin } = useAdmin();

  test("create applies defaults, quota and ttl semantics", async () => {
    const plain = await admin.json("POST", "/api/admin/users", { name: "u-plain", password: "password-1" }, 201);
    expect(plain).toMatchObject({ name: "u-plain", role: "user", quota_bytes: null, default_ttl_hours: null, disabled: false, used_bytes: 0, image_count: 0 });
    expect(plain.created_at).toMatch(/^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}$/);
    const zero = await admin.json("POST", "/api/admin/users", { name: "u-zero", password: "password-1", quota_bytes: 0, default_ttl_hours: 0 }, 201);
    expect(zero.quota_bytes).toBeNull(); // 0 or less means unlimited
    expect(zero.default_ttl_hours).toBe(0); // 0 means permanent, distinct from null
    const neg = await admin.json("POST", "/api/admin/users", { name: "u-neg", password: "password-1", quota_bytes: -5 }, 201);
    expect(neg.quota_bytes).toBeNull();
    const full = await admin.json(
      "POST",
      "/api/admin/users",
      { name: "u-full", password: "password-1", role: "admin", quota_bytes: 1048576, default_ttl_hours: 24 },
      201,
    );
    expect(full).toMatchObject({ role: "admin", quota_bytes: 1048576, default_ttl_hours: 24 });
    const list = await admin.json("GET", "/api/admin/users");
    expect(list.total).toBe(list.items.length);
    expect(list.items.map((u: { name: string }) => u.name)).toEqual(expect.arrayContaining(["admin", "u-plain", "u-zero", "u-full"]));
  });

  test("create is strict and validates every field", async () => {
    const bad = [
      { name: "x1", password: "password-1", extra: true },
      { name: "x2", password: "short" },
      { name: "", password: "password-1" },
      { name: "x".repeat(65), password: "password-1" },
      { name: "x3", password: "password-1", role: "root" },
      { name: "x4", password: "password-1", default_ttl_hours: 876001 },
      { name: "x5", password: "password-1", quota_bytes: 1.5 },
      { password: "password-1" },
    ];
    for (const body of bad) await expectError(await admin.request("POST", "/api/admin/users", body), 400);
    const list = await admin.json("GET", "/api/admin/users");
    expect(list.items.some((u: { name: string }) => /^x\d/.test(u.name))).toBe(false);
    await expectError(await admin.request("POST", "/api/admin/users", { name: "admin", password: "password-1" }), 409);
  });

  test("a name is taken in any letter case, and two creates of one name sent together give one user and 409s", async () => {
    const user = await admin.json("POST", "/api/admin/users", { name: "Casey", password: "password-1" }, 201);
    expect(await expectError(await admin.request("POST", "/api/admin/users", { name: "casey", password: "password-1" }), 409)).toBe(
      "已有只是大小写不同的同名用户",
    );
    const other = await admin.json("POST", "/api/admin/users", { name: "kim", password: "password-1" }, 201);
    const rename = { role: "user", quota_bytes: null, default_ttl_hours: null, disabled: false };
    await expectError(await admin.request("PUT", `/api/admin/users/${other.id}`, { ...rename, name: "CASEY" }), 409);
    // Its own name in another case is not someone else's.
    expect((await admin.json("PUT", `/api/admin/users/${user.id}`, { ...rename, name: "casey" })).name).toBe("casey");

    // Each waits out its password hash between the check and the insert.
    const raced = await Promise.all([1, 2, 3].map(() => admin.request("POST", "/api/admin/users", { name: "twin", password: "password-1" })));
    expect(raced.map((r) => r.status).sort()).toEqual([201, 409, 409]);
    for (const r of raced) await r.arrayBuffer();
  });

  test("update is a strict full replacement; built-in admin is protected", async () => {
    const u = await admin.json("POST", "/api/admin/users", { name: "u-edit", password: "password-1" }, 201);
    await expectError(await admin.request("PUT", `/api/admin/users/${u.id}`, { name: "u-edit2", role: "user" }), 400);
    await expectError(
      await admin.request("PUT", `/api/admin/users/${u.id}`, {
        name: "u-edit2",
        role: "user",
        quota_bytes: null,
        default_ttl_hours: null,
        disabled: false,
        x: 1,
      }),
      400,
    );
    await expectError(
      await admin.request("PUT", `/api/admin/users/${u.id}`, { name: "admin", role: "user", quota_bytes: null, default_ttl_hours: null, disabled: false }),
      409,
    );
    const edited = await admin.json("PUT", `/api/admin/users/${u.id}`, {
      name: "u-edit2",
      role: "user",
      quota_bytes: 0,
      default_ttl_hours: 5,
      disabled: false,
    });
    expect(edited).toMatchObject({ name: "u-edit2", quota_bytes: null, default_ttl_hours: 5 });
    for (const change of [{ disabled: true }, { role: "user" }]) {
      const body = { name: "admin", role: "admin", quota_bytes: null, default_ttl_hours: null, disabled: false, ...change };
      expect(await expectError(await admin.request("PUT", "/api/admin/users/default", body), 403)).toContain("内置管理员");
    }
    await expectError(
      await admin.request("PUT", "/api/admin/users/nobody", { name: "n", role: "user", quota_bytes: null, default_ttl_hours: null, disabled: false }),
      404,
    );
  });

  test("disabling a user ends their sessions, blocks login, and their tokens answer 403 saying so", async () => {
    const u = await admin.json("POST", "/api/admin/users", { name: "u-dis", password: "password-1" }, 201);
    const s = new Session(server);
    await s.login("u-dis", "password-1");
    const { token } = await s.json("POST", "/api/admin/tokens", { name: "t" }, 201);
    await admin.json("PUT", `/api/admin/users/${u.id}`, { name: "u-dis", role: "user", quota_bytes: null, default_ttl_hours: null, disabled: true });
    await expectError(await s.request("GET", "/api/admin/me"), 401);
    await expectError(await new Session(server).login("u-dis", "password-1"), 403);
    // As an upload stopped mid-body by the same change answers (it read "invalid, expired or revoked").
    const upload = await fetch(server.url("/api/upload"), {
      method: "POST",
      headers: { authorization: `Bearer ${token}` },
      body: form(await makePng(8, 8, 5), "x.png"),
    });
    expect([upload.status, await upload.json()]).toEqual([403, { error: "该账号已被停用" }]);
  });

  test("an admin cannot stop or demote their own account (as they cannot delete it); other fields of it change", async () => {
    const other = await admin.json("POST", "/api/admin/users", { name: "u-self", password: "password-1", role: "admin" }, 201);
    const s = new Session(server);
    await s.login("u-self", "password-1");
    const body = { name: "u-self", role: "admin", quota_bytes: null, default_ttl_hours: null, disabled: false };
    for (const change of [{ disabled: true }, { role: "user" }]) {
      expect(await expectError(await s.request("PUT", `/api/admin/users/${other.id}`, { ...body, ...change }), 400)).toContain("当前登录");
    }
    expect(await s.json("PUT", `/api/admin/users/${other.id}`, { ...body, default_ttl_hours: 3 })).toMatchObject({
      role: "admin",
      disabled: false,
      default_ttl_hours: 3,
    });
    // Another admin still may.
    expect(await admin.json("PUT", `/api/admin/users/${other.id}`, { ...body, role: "user" })).toMatchObject({ role: "user" });
  });

  test("delete: built-in admin 403, oneself 400, unknown 404, others 204", async () => {
    await expectError(await admin.request("DELETE", "/api/admin/users/default"), 403);
    const other = await admin.json("POST", "/api/admin/users", { name: "u-admin2", password: "password-1", role: "admin" }, 201);
    const s = new Session(server);
    await s.login("u-admin2", "password-1");
    expect(await expectError(await s.request("DELETE", `/api/admin/users/${other.id}`), 400)).toContain("当前登录");
    expect((await admin.request("DELETE", `/api/admin/users/${other.id}`)).status).toBe(204);
    await expectError(await admin.request("DELETE", `/api/admin/users/${other.id}`), 404);
    await expectError(await new Session(server).login("u-admin2", "password-1"), 401);
  });
});
