import { beforeAll, describe, expect, test } from "bun:test";
import { Elysia } from "elysia";
import type { AppContext } from "../../src/context";
import { OPEN_ADMIN_ROUTES } from "../../src/http/access";
import { createRouter } from "../../src/http/app";
import { routeAccess } from "../../src/http/guard";
import { adminSession, expectError, Session } from "../helpers/client";
import { useServer } from "../helpers/fixture";

/** Every /api/admin route the router serves, with parameters filled in and its declared access level. */
function adminRoutes() {
  // Handlers are never called here; the router is built only to list its routes.
  const router = createRouter({} as AppContext);
  return router.routes
    .filter((r) => r.path.startsWith("/api/admin/") && !OPEN_ADMIN_ROUTES.has(`${r.method} ${r.path}`))
    .map((r) => ({ method: r.method, template: r.path, path: r.path.replace(/:[A-Za-z_]+/g, "1"), access: routeAccess(r) }));
}

/**
 * The /api/admin routes a regular user may use (the spec's non-admin surface), written out
 * here independently of the code: every other guarded route must refuse them with 403.
 */
const USER_ROUTES = new Set([
  "GET /api/admin/me",
  "PUT /api/admin/me/password",
  "GET /api/admin/me/sessions",
  "DELETE /api/admin/me/sessions/:id",
  "POST /api/admin/me/sessions/end-others",
  "GET /api/admin/config",
  "GET /api/admin/dashboard",
  "POST /api/admin/upload",
  "POST /api/admin/upload/url",
  "GET /api/admin/images",
  "POST /api/admin/images/batch-delete",
  "GET /api/admin/images/:id",
  "PATCH /api/admin/images/:id",
  "DELETE /api/admin/images/:id",
  "GET /api/admin/images/:id/thumb",
  "GET /api/admin/tokens",
  "POST /api/admin/tokens",
  "DELETE /api/admin/tokens/:id",
  "POST /api/admin/tokens/:id/revoke",
  "POST /api/admin/tokens/:id/rotate",
  "POST /api/admin/tokens/:id/s3-credential",
]);

describe("/api/admin is closed by default", () => {
  test("the router refuses an /api/admin route outside a session route group", () => {
    const leak = new Elysia().get("/api/admin/forgotten", () => "open");
    expect(() => createRouter({} as AppContext, [leak])).toThrow(/GET \/api\/admin\/forgotten/);
  });

  test("every /api/admin route declares its access level, and some are admin-only", () => {
    const routes = adminRoutes();
    expect(routes.length).toBeGreaterThan(40);
    expect(routes.filter((r) => r.access === undefined)).toEqual([]);
    expect(routes.filter((r) => r.access === "admin").length).toBeGreaterThan(20);
  });
});

describe("route table walk against a real server", () => {
  let user: Session;
  const { server } = useServer();
  beforeAll(async () => {
    const admin = await adminSession(server);
    await admin.json("POST", "/api/admin/users", { name: "plain-user", password: "password-1" }, 201);
    user = new Session(server);
    expect((await user.login("plain-user", "password-1")).status).toBe(200);
  });

  test("without a session every guarded /api/admin route answers 401", async () => {
    const anonymous = new Session(server);
    const answers: string[] = [];
    for (const r of adminRoutes()) {
      const res = await anonymous.request(r.method, r.path);
      if (res.status !== 401) answers.push(`${r.method} ${r.template} → ${res.status}`);
      else await expectError(res, 401);
    }
    expect(answers).toEqual([]);
  });

  test("a regular user gets 403 from every admin-only route and passes the guard on the user surface", async () => {
    const wrong: string[] = [];
    for (const r of adminRoutes()) {
      const res = await user.request(r.method, r.path);
      const status = res.status;
      await res.arrayBuffer();
      const mayUse = USER_ROUTES.has(`${r.method} ${r.template}`);
      const ok = mayUse ? status !== 401 && status !== 403 : status === 403;
      if (!ok) wrong.push(`${r.method} ${r.template} (declared ${r.access}) → ${status}`);
    }
    expect(wrong).toEqual([]);
  });
});
