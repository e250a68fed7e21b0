import { ApiError } from "./errors";

/**
 * Spec section 4: "JSON bodies use application/json". Elysia's default parser would also turn a
 * urlencoded or multipart form into an object, and those are the content types a cross-site
 * HTML form can send without a CORS preflight: a form on any site could then log a visitor's
 * browser into the attacker's account (login CSRF, the one write that needs no CSRF token).
 * So a route that reads its body with the default parser takes JSON only; the routes that read
 * raw bodies (uploads, S3, the Lsky Pro and Chevereto surfaces) declare `parse: "none"`.
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

/** The routes that read their own bodies, as `METHOD path` (filled once every route is registered). */
export class RawBodyRoutes {
  readonly #routes = new Set<string>();

  learn(routes: readonly RouteLike[]): void {
    for (const route of routes) if (readsRawBody(route)) this.#routes.add(`${route.method} ${route.path}`);
  }

  /** Refuses a non-JSON body on a route that parses JSON; lets everything else through. */
  check(request: Request, route: string): void {
    const contentType = request.headers.get("content-type");
    if (!contentType || !hasBody(request) || this.#routes.has(`${request.method} ${route}`) || isJsonContentType(contentType)) return;
    throw new ApiError(400, NOT_JSON);
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
