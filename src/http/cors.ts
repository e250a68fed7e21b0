/**
 * Cross-origin calls to the upload-token API. Lsky Pro answers CORS for any origin on `api/*`, and
 * what its users built on that (Waline's guide uploads comment images with `fetch` from the page,
 * an `Authorization` header and so a preflight) failed against Kura at the preflight, before the
 * upload was sent. These paths authorize by upload token only, so letting any page read their
 * answers gives it nothing it did not bring: no `Access-Control-Allow-Credentials`, so a browser
 * never sends the console's session cookie with such a request. Everything else (the console's
 * API, `/i/`, S3 with its own rules) stays same-origin.
 */

const TOKEN_API_PREFIX = "/api/v1/";
const TOKEN_API_PATHS: ReadonlySet<string> = new Set(["/api/upload", "/api/upload/url"]);
/**
 * Lsky's token endpoint takes a name and password. Readable from any page, every visitor's browser
 * could try passwords for a site that hides it (each from its own address, past the per-address
 * throttle) and read which one worked; the browser uploaders need only the token they were given.
 */
const PASSWORD_PATHS: ReadonlySet<string> = new Set(["/api/v1/tokens"]);

const ALLOWED_METHODS = "GET, POST, DELETE";
/** What a page may send: the token, the body's type, and the safe retry key. */
const ALLOWED_HEADERS = "authorization, content-type, accept, idempotency-key, x-requested-with";
/** One preflight a day per page and path: uploads in a row do not each pay a round trip. */
const PREFLIGHT_MAX_AGE_SECONDS = "86400";

export function isCorsPath(path: string): boolean {
  return (path.startsWith(TOKEN_API_PREFIX) && !PASSWORD_PATHS.has(path)) || TOKEN_API_PATHS.has(path);
}

/** The answer to a CORS preflight on a token-API path; undefined for any other request. */
export function corsPreflight(request: Request, path: string): Response | undefined {
  if (request.method !== "OPTIONS" || !isCorsPath(path)) return undefined;
  if (!request.headers.has("origin") || !request.headers.has("access-control-request-method")) return undefined;
  return new Response(null, {
    status: 204,
    headers: {
      "access-control-allow-origin": "*",
      "access-control-allow-methods": ALLOWED_METHODS,
      "access-control-allow-headers": ALLOWED_HEADERS,
      "access-control-max-age": PREFLIGHT_MAX_AGE_SECONDS,
    },
  });
}

/** Lets a page on another origin read a token-API answer (errors and 429s included, so it can say why). */
export function allowCrossOriginRead(request: Request, path: string, response: Response): void {
  if (!isCorsPath(path) || !request.headers.has("origin")) return;
  response.headers.set("access-control-allow-origin", "*");
  response.headers.set("access-control-expose-headers", "retry-after");
}
