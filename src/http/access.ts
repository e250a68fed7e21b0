import { routeAccess } from "./guard";

/**
 * /api/admin is closed by default: every route there must come from a session route
 * group (`sessionRoutes`). These are the only exceptions — the routes a visitor without
 * a session must reach. Logout is idempotent: it clears the cookie of an ended session too.
 */
export const OPEN_ADMIN_ROUTES: ReadonlySet<string> = new Set(["POST /api/admin/auth/login", "POST /api/admin/auth/logout"]);

const ADMIN_PREFIX = "/api/admin/";

/**
 * Refuses to build a router with an unguarded /api/admin route that is not listed above:
 * forgetting the guard fails at startup (and in every test), not silently in production.
 */
export function assertAdminRoutesGuarded(routes: readonly { method: string; path: string; hooks?: unknown }[]): void {
  const open = routes.filter((r) => r.path.startsWith(ADMIN_PREFIX) && !OPEN_ADMIN_ROUTES.has(`${r.method} ${r.path}`) && routeAccess(r) === undefined);
  if (open.length > 0) throw new Error(`未声明访问控制的管理接口: ${open.map((r) => `${r.method} ${r.path}`).join(", ")}`);
}
