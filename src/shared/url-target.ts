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

/** Where the path starts: 0 for a bare target (see hasOrigin), else after the authority; -1 when there is none. */
export function pathStart(url: string): number {
  if (url.charCodeAt(0) === SLASH) return 0;
  return url.indexOf("/", url.indexOf("//") + 2);
}
