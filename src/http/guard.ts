import { Elysia } from "elysia";
import type { AppContext } from "../context";
import { SESSION_COOKIE } from "../auth/sessions";
import { authenticateUploadToken, type TokenPrincipal } from "../auth/tokens";
import type { UserRow } from "../users/repo";
import { forbidden, unauthorized } from "./errors";

export interface Principal {
  user: UserRow;
  sessionToken: string;
}

export interface GuardOptions {
  /** Administrators only. */
  admin?: boolean;
  /** Still reachable with the factory default password (logout, me, own password). */
  allowDefaultPassword?: boolean;
}

const SAFE_METHODS = new Set(["GET", "HEAD", "OPTIONS"]);

/**
 * The named cookie's value, or undefined. Never throws: a value that is not valid
 * percent-encoding cannot be one we issued, so it counts as absent.
 */
export function readCookie(request: Request, name: string): string | undefined {
  const header = request.headers.get("cookie");
  if (!header) return undefined;
  for (const part of header.split(";")) {
    const eq = part.indexOf("=");
    if (eq < 0) continue;
    if (part.slice(0, eq).trim() === name) return decodeCookieValue(part.slice(eq + 1).trim());
  }
  return undefined;
}

function decodeCookieValue(raw: string): string | undefined {
  try {
    return decodeURIComponent(raw);
  } catch {
    return undefined;
  }
}

/**
 * Session authentication for /api/admin: 401 without a valid session, then
 * 403 for a missing/wrong CSRF token on state-changing methods, the default
 * password lockout, and admin-only endpoints — in that order.
 */
export function authenticate(app: AppContext, request: Request, opts: GuardOptions = {}): Principal {
  const token = readCookie(request, SESSION_COOKIE);
  const userId = token ? app.sessions.lookup(token) : undefined;
  const user = userId ? app.users.byId(userId) : undefined;
  if (!token || !user || user.disabled) throw unauthorized();
  if (!SAFE_METHODS.has(request.method) && !app.sessions.csrfMatches(token, request.headers.get("x-csrf-token"))) {
    throw forbidden("CSRF 校验失败：缺少或错误的 X-CSRF-Token");
  }
  if (user.must_change_password && !opts.allowDefaultPassword) {
    throw forbidden("请先修改出厂默认密码，然后重新登录");
  }
  if (opts.admin && user.role !== "admin") throw forbidden("需要管理员权限");
  return { user, sessionToken: token };
}

/**
 * Who may use a route group: any signed-in user, administrators only, or "self" —
 * a signed-in user even while still on the factory default password (me, own password).
 */
export type Access = "user" | "admin" | "self";

const GUARD_OPTIONS: Record<Access, GuardOptions> = { user: {}, admin: { admin: true }, self: { allowDefaultPassword: true } };

/** The resolver of each session route group, so the router can tell guarded routes apart. */
const resolverAccess = new WeakMap<object, Access>();

/** A route group's authentication of a request: returns the principal, or throws its 401/403. */
export type RouteGuard = (request: Request) => unknown;

/**
 * The authentication each route group's resolver runs, by resolver: a request refused before its
 * resolve runs (a body that is not JSON, json-bodies.ts) is authenticated with it first, so its
 * 401/403 do not depend on whether the body parses.
 */
const resolverGuards = new WeakMap<object, RouteGuard>();

/**
 * A route group whose every handler receives `principal`: the session is checked
 * before the handler runs (401, then CSRF / default password / admin 403), so a
 * route added to the group cannot forget it. A body that cannot be read is refused
 * (400) only after the same check (json-bodies.ts).
 */
export function sessionRoutes(app: AppContext, access: Access) {
  const options = GUARD_OPTIONS[access];
  const guard = (request: Request): Principal => authenticate(app, request, options);
  const resolvePrincipal = ({ request }: { request: Request }) => ({ principal: guard(request) });
  resolverAccess.set(resolvePrincipal, access);
  resolverGuards.set(resolvePrincipal, guard);
  return new Elysia().resolve(resolvePrincipal);
}

/**
 * The data plane's route group (spec section 5: `Authorization: Bearer <UPLOAD_TOKEN>`): every
 * handler receives `uploader`, the token and its owner, checked before the handler reads the body
 * (401 for an invalid, expired or revoked token; 403 without upload permission), and before a body
 * that cannot be read is refused. Never an admin route: it gives no access level (access.ts).
 */
export function uploadTokenRoutes(app: AppContext) {
  const guard = (request: Request): TokenPrincipal => authenticateUploadToken(app, request);
  const resolveUploader = ({ request }: { request: Request }) => ({ uploader: guard(request) });
  resolverGuards.set(resolveUploader, guard);
  return new Elysia().resolve(resolveUploader);
}

/** The resolvers (and other before-handle hooks) of a registered route, from the router's own route table. */
function beforeHandleFns(route: { hooks?: unknown }): object[] {
  const hooks = route.hooks as { beforeHandle?: { fn?: unknown }[] } | undefined;
  return (hooks?.beforeHandle ?? []).flatMap((hook) => (typeof hook.fn === "function" ? [hook.fn] : []));
}

/** The access level a registered route was declared with, from the router's own route table. */
export function routeAccess(route: { hooks?: unknown }): Access | undefined {
  for (const fn of beforeHandleFns(route)) {
    const access = resolverAccess.get(fn);
    if (access) return access;
  }
  return undefined;
}

/** The authentication a registered route's group runs before its handler, if any. */
export function routeGuard(route: { hooks?: unknown }): RouteGuard | undefined {
  for (const fn of beforeHandleFns(route)) {
    const guard = resolverGuards.get(fn);
    if (guard) return guard;
  }
  return undefined;
}
