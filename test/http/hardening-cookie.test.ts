import { describe, expect, test } from "bun:test";
import { expectError } from "../helpers/client";
import { useAdmin } from "../helpers/fixture";

describe("row 5: cookie parsing cannot throw", () => {
  const { server, admin } = useAdmin();

  const get = (path: string, cookie: string, method = "GET") => fetch(server.url(path), { method, headers: { cookie } });

  test("a malformed kura_session is an unauthenticated request, not a 500", async () => {
    const logsBefore = server.logs.length;
    for (const value of ["%E0%A4%A", "%", "%zz", "%C3%28", "%ED%A0%80"]) {
      await expectError(await get("/api/admin/me", `kura_session=${value}`), 401);
      await expectError(await get("/api/admin/images", `a=1; kura_session=${value}; b=2`), 401);
      expect((await get("/api/admin/auth/logout", `kura_session=${value}`, "POST")).status).toBe(204);
    }
    expect(server.logs.slice(logsBefore)).not.toMatch(/level=ERROR/);
  });

  test("a malformed unrelated cookie does not break a valid session", async () => {
    const res = await get("/api/admin/me", `tracker=%E0%A4%A; ${admin.cookie}`);
    expect(res.status).toBe(200);
    expect(((await res.json()) as { user: { name: string } }).user.name).toBe("admin");
  });
});
