/**
 * Path and query of a request URL exactly as sent (still percent-encoded), without building a
 * URL object: the hot path and SigV4 both need the raw form.
 */
export function rawTarget(url: string): { path: string; query: string } {
  const start = pathStart(url);
  const target = start < 0 ? "/" : url.slice(start);
  const q = target.indexOf("?");
  return q < 0 ? { path: target, query: "" } : { path: target.slice(0, q), query: target.slice(q + 1) };
}

function pathStart(url: string): number {
  return url.indexOf("/", url.indexOf("//") + 2);
}

/**
 * Elysia's compiled router looks for the path at the first "/" from index 11 of the URL,
 * i.e. it assumes an authority of at least four characters. With a shorter Host ("a",
 * "a.b") it would route `/s3/api/x` as `/api/x` while everything else (body cap, S3
 * surface, metrics) sees `/s3/api/x`. Such a request gets a URL with a placeholder
 * authority, so there is only one notion of the request path; the Host header itself is
 * untouched (links and SigV4 read the header, not the URL).
 */
const ROUTER_PATH_SEARCH_FROM = 11;
const PLACEHOLDER_AUTHORITY = "kura.invalid";

export function routableRequest(request: Request): Request {
  const url = request.url;
  const start = pathStart(url);
  if (start >= 0 && url.indexOf("/", ROUTER_PATH_SEARCH_FROM) === start) return request;
  const scheme = url.slice(0, url.indexOf("//"));
  const target = start < 0 ? "/" : url.slice(start);
  return new Request(`${scheme}//${PLACEHOLDER_AUTHORITY}${target}`, {
    method: request.method,
    headers: request.headers,
    body: request.body,
    signal: request.signal,
    duplex: "half", // the body streams through unread
  } as RequestInit);
}
