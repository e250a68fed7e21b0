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

export const SLASH = 47;

/**
 * The path as the router matches it. Elysia (strictPath off) routes `/api/1/upload/` to
 * `/api/1/upload` (one slash, not two), and the Chevereto docs' own example has it: checks by exact
 * path (the body cap, CORS, metrics) drop that slash too, or the slashed form got a 1 MiB cap and
 * `/api/v1/tokens/` the cross-origin reads the unslashed form refuses. Not under /s3/, where a
 * trailing slash names a bucket or a folder's key.
 */
export function routedPath(path: string): string {
  if (path.length < 2 || path.charCodeAt(path.length - 1) !== SLASH || path.charCodeAt(path.length - 2) === SLASH) return path;
  return isS3Path(path) ? path : path.slice(0, -1);
}

/** The S3-compatible surface: `/s3` and everything under it. */
export const isS3Path = (path: string) => path === "/s3" || path.startsWith("/s3/");

/** Where the path starts: 0 for a bare target (see hasOrigin), else after the authority; -1 when there is none. */
export function pathStart(url: string): number {
  if (url.charCodeAt(0) === SLASH) return 0;
  return url.indexOf("/", url.indexOf("//") + 2);
}
