import { pathStart, SLASH } from "../shared/url-target";

/**
 * Bun builds `request.url` from the Host header. Without one (HTTP/1.0), or with one that is no
 * valid authority (`x y`, `x"y`, empty), the URL is the request target as sent, unnormalized
 * (`/healthz`), which `new URL` rejects: such a request gets the placeholder origin below.
 */
export function hasOrigin(url: string): boolean {
  return url.startsWith("http://") || url.startsWith("https://");
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
export const PLACEHOLDER_ORIGIN = `http://${PLACEHOLDER_AUTHORITY}`;

export function routableRequest(request: Request): Request {
  const url = request.url;
  const start = pathStart(url);
  const target = start < 0 ? "/" : url.slice(start);
  // Bun also builds URLs no parser accepts (`Host: a:99999`): the placeholder too, so handlers may parse the URL.
  if (!hasOrigin(url) || !URL.canParse(url)) return withPlaceholderOrigin(request, target);
  if (start >= 0 && url.indexOf("/", ROUTER_PATH_SEARCH_FROM) === start) return request;
  const scheme = url.slice(0, url.indexOf("//"));
  return withUrl(request, `${scheme}//${PLACEHOLDER_AUTHORITY}${target}`);
}

/**
 * A request whose URL has no origin (hasOrigin), with the placeholder one. `target` is the
 * request target as sent (the URL Bun gave, or what a delivery thread carried over): the
 * Request constructor normalizes it (dot segments, `\`) exactly as Bun does for a valid Host,
 * so every listener sees the same path. A target that is not a path (CONNECT's authority
 * form) becomes `/`. The Host header stays as it was: routes judge it (requireUsableHost).
 */
export function withPlaceholderOrigin(request: Request, target = request.url): Request {
  return withUrl(request, PLACEHOLDER_ORIGIN + (target.charCodeAt(0) === SLASH ? target : "/"));
}

/** The same request at another URL; the body streams through unread. */
export function withUrl(request: Request, url: string): Request {
  return new Request(url, {
    method: request.method,
    headers: request.headers,
    body: request.body,
    signal: request.signal,
    duplex: "half",
  } as RequestInit);
}
