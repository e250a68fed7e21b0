/**
 * Spec sections 4 and 5: a guarded route answers a body it cannot take (malformed JSON, a form, plain
 * text) in the same order as any other request: 401 without a session (or upload token), then for
 * a session write 403 without X-CSRF-Token, 403 on the factory default password, 403 for a regular
 * user on an admin route, and only then 400. Audit finding: the 400 came first, because the body
 * was parsed and checked (Elysia's parse, the JSON-only transform) before the session group's
 * resolve looked at the cookie, so an anonymous or CSRF-less request learned about the body.
 */
import { beforeAll, describe, expect, test } from "bun:test";
import type { AppContext } from "../../src/context";
import { OPEN_ADMIN_ROUTES } from "../../src/http/access";
import { createRouter } from "../../src/http/app";
import { routeAccess } from "../../src/http/guard";
import { adminSession, Session } from "../helpers/client";
import { useServer } from "../helpers/fixture";

const NOT_JSON = "请求体必须是有效的 JSON（Content-Type: application/json）";
const NOT_LOGGED_IN = "未登录或会话已过期";
const CSRF = "CSRF 校验失败：缺少或错误的 X-CSRF-Token";
const LOCKED = "请先修改出厂默认密码，然后重新登录";
const ADMIN_ONLY = "需要管理员权限";
const INVALID_TOKEN = "上传令牌无效、已过期或已吊销";
/** No Authorization header at all: told apart from a wrong token. */
const NO_TOKEN = "缺少上传令牌：请在 Authorization 头中以 Bearer <令牌> 发送";

/** Bodies a JSON route cannot take: `[what, content type, body]`. */
const BAD_BODIES: ReadonlyArray<readonly [string, string, string]> = [
  ["malformed JSON", "application/json", "{not json"],
  ["urlencoded", "application/x-www-form-urlencoded", "name=x&password=y"],
  ["text/plain", "text/plain", '{"name":"x"}'],
  ["malformed multipart", "multipart/form-data; boundary=kura", "not a multipart body"],
];
/** The bodies refused on every route whatever its handler reads: the content type alone decides. */
const WRONG_TYPES = BAD_BODIES.filter(([, type]) => type !== "application/json");

/**
 * The guarded routes whose handlers read a JSON body: malformed JSON reaches them as a parse failure.
 * A route that reads no body ignores malformed JSON once the guard let it in, so it is sent only the
 * wrong content types once authenticated.
 */
const JSON_ROUTES = new Set([
  "PUT /api/admin/me/password",
  "POST /api/admin/users",
  "PUT /api/admin/users/:id",
  "POST /api/admin/users/:id/password",
  "PUT /api/admin/config",
  "POST /api/admin/tokens",
  "POST /api/admin/upload/url",
  "POST /api/admin/images/batch-delete",
  "POST /api/admin/images/batch-exempt",
  "PATCH /api/admin/images/:id",
  "POST /api/admin/channels",
  "POST /api/admin/channels/test",
  "PUT /api/admin/channels/:id",
  "POST /api/admin/channel-oauth/start",
  "POST /api/admin/referer-whitelist",
  "POST /api/admin/dedup/:id/merge",
]);

interface Route {
  method: string;
  template: string;
  path: string;
  access: string | undefined;
  /** Reads its own body (`parse: "none"`, the multipart upload): no JSON check to run into. */
  raw: boolean;
}

/** Every state-changing guarded /api/admin route the router serves, with parameters filled in. */
function guardedWrites(): Route[] {
  // Handlers are never called here; the router is built only to list its routes.
  return createRouter({} as AppContext)
    .routes.filter((r) => r.path.startsWith("/api/admin/") && !["GET", "HEAD"].includes(r.method) && !OPEN_ADMIN_ROUTES.has(`${r.method} ${r.path}`))
    .map((r) => {
      const parse = (r.hooks as { parse?: { fn?: unknown }[] } | undefined)?.parse ?? [];
      return {
        method: r.method,
        template: r.path,
        path: r.path.replace(/:[A-Za-z_]+/g, "XXXXXXXXXX"),
        access: routeAccess(r),
        raw: parse.some((p) => p.fn === "none"),
      };
    });
}

/** One request with a bad body, as `who` (a session, or nobody), with or without the CSRF token. */
async function send(
  server: { url(path: string): string },
  who: Session | undefined,
  route: Route,
  [, type, body]: readonly [string, string, string],
  csrf: boolean,
) {
  const headers: Record<string, string> = { "content-type": type };
  if (who) headers.cookie = who.cookie;
  if (who && csrf) headers["x-csrf-token"] = who.csrf;
  const res = await fetch(server.url(route.path), { method: route.method, headers, body });
  const text = await res.text();
  let error: unknown;
  try {
    error = (JSON.parse(text) as { error?: unknown }).error;
  } catch {
    error = text;
  }
  return { status: res.status, error, headers: res.headers };
}

/** Sends every bad body to every route and lists the answers that differ from `expected`. */
async function walk(
  server: { url(path: string): string },
  routes: Route[],
  bodies: ReadonlyArray<readonly [string, string, string]>,
  who: Session | undefined,
  csrf: boolean,
  expected: (route: Route) => [number, string],
): Promise<string[]> {
  const wrong: string[] = [];
  for (const route of routes) {
    for (const body of bodies) {
      const [status, error] = expected(route);
      const got = await send(server, who, route, body, csrf);
      if (got.status !== status || got.error !== error)
        wrong.push(`${route.method} ${route.template} [${body[0]}] → ${got.status} ${got.error}, want ${status} ${error}`);
    }
  }
  return wrong;
}

describe("a body that is not JSON is refused only after the session check", () => {
  const { server } = useServer();
  const routes = guardedWrites();
  let admin: Session;
  let user: Session;
  let token: string;

  beforeAll(async () => {
    admin = await adminSession(server);
    await admin.json("POST", "/api/admin/users", { name: "plain-user", password: "password-1" }, 201);
    user = new Session(server);
    expect((await user.login("plain-user", "password-1")).status).toBe(200);
    ({ token } = await admin.json<{ token: string }>("POST", "/api/admin/tokens", { name: "data-plane" }, 201));
  });

  test("the walk covers the write routes the audit named", () => {
    const names = new Set(routes.map((r) => `${r.method} ${r.template}`));
    for (const named of [
      "POST /api/admin/users",
      "POST /api/admin/tokens",
      "POST /api/admin/channels",
      "PATCH /api/admin/images/:id",
      "PUT /api/admin/config",
      "PUT /api/admin/me/password",
    ]) {
      expect(names).toContain(named);
    }
    for (const named of JSON_ROUTES) expect(names).toContain(named);
    expect(routes.length).toBeGreaterThan(25);
    expect(routes.filter((r) => r.access === undefined)).toEqual([]);
  });

  test("without a session: 401 on every route, for every bad body", async () => {
    expect(await walk(server, routes, BAD_BODIES, undefined, false, () => [401, NOT_LOGGED_IN])).toEqual([]);
  });

  test("an upload token is no session: 401 too", async () => {
    const wrong: string[] = [];
    for (const route of routes) {
      const res = await fetch(server.url(route.path), {
        method: route.method,
        headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
        body: "{not json",
      });
      if (res.status !== 401) wrong.push(`${route.method} ${route.template} → ${res.status} ${await res.text()}`);
      else await res.arrayBuffer();
    }
    expect(wrong).toEqual([]);
  });

  test("logged in without X-CSRF-Token: 403 on every route, for the admin and a regular user alike", async () => {
    expect(await walk(server, routes, BAD_BODIES, admin, false, () => [403, CSRF])).toEqual([]);
    expect(await walk(server, routes, BAD_BODIES, user, false, () => [403, CSRF])).toEqual([]);
  });

  test("a regular user with the CSRF token: 403 on admin routes, the 400 on their own", async () => {
    const expected = (r: Route): [number, string] => (r.access === "admin" ? [403, ADMIN_ONLY] : [400, NOT_JSON]);
    const cooked = routes.filter((r) => !r.raw);
    expect(await walk(server, cooked, WRONG_TYPES, user, true, expected)).toEqual([]);
    const json = cooked.filter((r) => JSON_ROUTES.has(`${r.method} ${r.template}`));
    expect(await walk(server, json, BAD_BODIES.slice(0, 1), user, true, expected)).toEqual([]);
  });

  test("the admin with the CSRF token: the 400 with its Chinese message, and nothing changed", async () => {
    const before = await admin.json("GET", "/api/admin/config/full");
    const users = await admin.json("GET", "/api/admin/users");
    const cooked = routes.filter((r) => !r.raw);
    expect(await walk(server, cooked, WRONG_TYPES, admin, true, () => [400, NOT_JSON])).toEqual([]);
    const json = cooked.filter((r) => JSON_ROUTES.has(`${r.method} ${r.template}`));
    expect(await walk(server, json, BAD_BODIES, admin, true, () => [400, NOT_JSON])).toEqual([]);
    expect(await admin.json("GET", "/api/admin/config/full")).toEqual(before);
    expect(await admin.json("GET", "/api/admin/users")).toEqual(users);
  });

  test("a well-formed body keeps the order: 401, then 403 for CSRF", async () => {
    const json = routes.filter((r) => JSON_ROUTES.has(`${r.method} ${r.template}`));
    const body = ["object", "application/json", "{}"] as const;
    expect(await walk(server, json, [body], undefined, false, () => [401, NOT_LOGGED_IN])).toEqual([]);
    expect(await walk(server, json, [body], user, false, () => [403, CSRF])).toEqual([]);
  });

  test("login stays open: a malformed body there is the 400 (no credential to check first)", async () => {
    const res = await fetch(server.url("/api/admin/auth/login"), { method: "POST", headers: { "content-type": "application/json" }, body: "{not json" });
    expect(res.status).toBe(400);
    expect(((await res.json()) as { error: string }).error).toBe(NOT_JSON);
  });

  test("POST /api/upload/url (upload token): 401 without a valid token, the 400 with one", async () => {
    const route: Route = { method: "POST", template: "/api/upload/url", path: "/api/upload/url", access: undefined, raw: false };
    for (const body of BAD_BODIES) {
      for (const authorization of [undefined, `Bearer ${token}x`, `Bearer ${token}`]) {
        const headers: Record<string, string> = { "content-type": body[1], ...(authorization ? { authorization } : {}) };
        const res = await fetch(server.url(route.path), { method: "POST", headers, body: body[2] });
        const { error } = (await res.json()) as { error: string };
        if (authorization === `Bearer ${token}`) expect(`${body[0]} ${res.status} ${error}`).toBe(`${body[0]} 400 ${NOT_JSON}`);
        else {
          expect(`${body[0]} ${res.status} ${error}`).toBe(`${body[0]} 401 ${authorization ? INVALID_TOKEN : NO_TOKEN}`);
          expect(res.headers.get("www-authenticate")).toStartWith("Bearer");
        }
      }
    }
    // The session is not a credential here.
    const res = await fetch(server.url(route.path), {
      method: "POST",
      headers: { "content-type": "text/plain", cookie: admin.cookie, "x-csrf-token": admin.csrf },
      body: "x",
    });
    expect(res.status).toBe(401);
    await res.arrayBuffer();
  });

  test("Lsky Pro's bodiless routes answer like Lsky whatever the body's type: 401 without a token, served with one", async () => {
    const lsky = async (method: string, path: string, authorization?: string) => {
      const headers: Record<string, string> = { "content-type": "text/plain", accept: "application/json", ...(authorization ? { authorization } : {}) };
      const res = await fetch(server.url(path), { method, headers, body: "x" });
      return { status: res.status, body: (await res.json()) as { status: boolean; message: string } };
    };
    for (const [method, path] of [
      ["DELETE", "/api/v1/images/XXXXXXXXXX"],
      ["DELETE", "/api/v1/albums/1"],
      ["DELETE", "/api/v1/tokens"],
    ] as const) {
      const anonymous = await lsky(method, path);
      expect(`${method} ${path} ${anonymous.status}`).toBe(`${method} ${path} 401`);
      expect(anonymous.body).toMatchObject({ status: false, message: INVALID_TOKEN });
      const own = await lsky(method, path, `Bearer ${token}`);
      expect(`${method} ${path} ${own.status} ${own.body.status}`).toBe(`${method} ${path} 200 true`);
    }
  });
});

describe("the factory default password lock also comes before the body", () => {
  const { server } = useServer();
  const routes = guardedWrites();
  let locked: Session;

  beforeAll(async () => {
    locked = new Session(server);
    expect((await locked.login("admin", server.defaultPassword())).status).toBe(200);
  });

  test("without the CSRF token: 403 for CSRF first", async () => {
    expect(await walk(server, routes, BAD_BODIES, locked, false, () => [403, CSRF])).toEqual([]);
  });

  test("with it: the lock on every route but the own password change, which gets the 400", async () => {
    const expected = (r: Route): [number, string] => (r.access === "self" ? [400, NOT_JSON] : [403, LOCKED]);
    expect(await walk(server, routes, WRONG_TYPES, locked, true, expected)).toEqual([]);
    const json = routes.filter((r) => JSON_ROUTES.has(`${r.method} ${r.template}`));
    expect(await walk(server, json, BAD_BODIES, locked, true, expected)).toEqual([]);
  });
});
