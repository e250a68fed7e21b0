import { ApiError } from "./errors";
import { type RouteGuard, routeGuard } from "./guard";

/**
 * Spec section 4: "JSON bodies use application/json". Elysia's default parser would also turn a
 * urlencoded or multipart form into an object, and those are the content types a cross-site
 * HTML form can send without a CORS preflight: a form on any site could then log a visitor's
 * browser into the attacker's account (login CSRF, the one write that needs no CSRF token).
 * So a route that reads its body with the default parser takes JSON only; the routes that read
 * raw bodies (uploads, S3, the Lsky Pro and Chevereto surfaces) declare `parse: "none"`.
 *
 * A refusal comes after the route's own authentication (spec sections 4 and 5): a request without
 * a session (or upload token) gets its 401, a session write without the CSRF token its 403, whether
 * or not its body parses; only an authenticated request learns that its body is not JSON.
 */
const JSON_TYPE = /^application\/json\s*(?:;|$)/i;

/** The answer to a body that is not JSON at all, and (app.ts) to one that is not valid JSON. */
export const NOT_JSON = "请求体必须是有效的 JSON（Content-Type: application/json）";

export function isJsonContentType(contentType: string): boolean {
  return JSON_TYPE.test(contentType.trim());
}

interface RouteLike {
  method: string;
  path: string;
  hooks?: { parse?: unknown };
}

/**
 * The compatible APIs read (or ignore) their bodies themselves, as Lsky Pro (Laravel) and Chevereto
 * do, which refuse no request for its content type: a `DELETE /api/v1/images/:key` with a text body
 * gets Lsky's 401 without a token and is served with one. Their body-reading routes are
 * `parse: "none"`; the others never have a body parsed.
 */
const OWN_BODY_SURFACES = ["/api/v1/", "/api/1/"];

/** Which routes read their own bodies, and each guarded route's authentication (filled once every route is registered). */
export class BodyRoutes {
  readonly #raw = new Set<string>();
  readonly #guards = new Map<string, RouteGuard>();

  learn(routes: readonly RouteLike[]): void {
    for (const route of routes) {
      const key = `${route.method} ${route.path}`;
      if (readsRawBody(route) || OWN_BODY_SURFACES.some((prefix) => route.path.startsWith(prefix))) this.#raw.add(key);
      const guard = routeGuard(route);
      if (guard) this.#guards.set(key, guard);
    }
  }

  /** Refuses a non-JSON body on a route that parses JSON; lets everything else through. */
  check(request: Request, route: string): void {
    const contentType = request.headers.get("content-type");
    if (!contentType || !hasBody(request) || this.#raw.has(`${request.method} ${route}`) || isJsonContentType(contentType)) return;
    throw this.refusal(request, route);
  }

  /**
   * The answer to a body that is not JSON (`check`) or does not parse (Elysia's PARSE, app.ts):
   * the route's 401/403 when its authentication fails, else the 400. Runs before the route's
   * resolve, which then never runs: a request is authenticated once either way.
   */
  refusal(request: Request, route: string | undefined): unknown {
    try {
      this.#guards.get(`${request.method} ${route}`)?.(request);
    } catch (err) {
      return err;
    }
    return new ApiError(400, NOT_JSON);
  }
}

/** A content type on a bodiless request (some clients send one with every DELETE) says nothing. */
function hasBody(request: Request): boolean {
  const length = request.headers.get("content-length");
  return request.headers.has("transfer-encoding") || (length !== null && length !== "0");
}

function readsRawBody(route: RouteLike): boolean {
  const parse = route.hooks?.parse;
  const parsers = Array.isArray(parse) ? parse : parse === undefined ? [] : [parse];
  return parsers.some((p) => p === "none" || (typeof p === "object" && p !== null && (p as { fn?: unknown }).fn === "none"));
}
