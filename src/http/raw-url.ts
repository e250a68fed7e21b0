/**
 * Path and query of a request URL exactly as sent (still percent-encoded), without building a
 * URL object: the hot path and SigV4 both need the raw form.
 */
export function rawTarget(url: string): { path: string; query: string } {
  const start = url.indexOf("/", url.indexOf("//") + 2);
  const target = start < 0 ? "/" : url.slice(start);
  const q = target.indexOf("?");
  return q < 0 ? { path: target, query: "" } : { path: target.slice(0, q), query: target.slice(q + 1) };
}
