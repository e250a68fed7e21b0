import { Elysia } from "elysia";
import type { AppContext } from "../context";
import { SESSION_COOKIE } from "../auth/sessions";
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

/**
 * A route group whose every handler receives `principal`: the session is checked
 * before the handler runs (401, then CSRF / default password / admin 403), so a
 * route added to the group cannot forget it.
 */
export function sessionRoutes(app: AppContext, access: Access) {
  const resolvePrincipal = ({ request }: { request: Request }) => ({ principal: authenticate(app, request, GUARD_OPTIONS[access]) });
  resolverAccess.set(resolvePrincipal, access);
  return new Elysia().resolve(resolvePrincipal);
}

/** The access level a registered route was declared with, from the router's own route table. */
export function routeAccess(route: { hooks?: unknown }): Access | undefined {
  const hooks = route.hooks as { beforeHandle?: { fn?: unknown }[] } | undefined;
  for (const hook of hooks?.beforeHandle ?? []) {
    const access = typeof hook.fn === "function" ? resolverAccess.get(hook.fn) : undefined;
    if (access) return access;
  }
  return undefined;
}
