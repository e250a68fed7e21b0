/**
 * Path mapping between Kura keys and WebDAV URLs. Requests encode every
 * segment; answers come back as hrefs that servers encode each in their own way
 * (which characters are escaped, upper/lower hex, absolute URL or absolute
 * path), so hrefs are compared segment by segment after decoding, never as
 * strings.
 */

/** Percent-encodes one path segment, also the sub-delims encodeURIComponent leaves alone. */
export function encodeSegment(segment: string): string {
  return encodeURIComponent(segment).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);
}

export function encodePath(relative: string): string {
  return relative === "" ? "" : relative.split("/").map(encodeSegment).join("/");
}

/** URL of `relative` (a '/'-separated path below the endpoint); collections get a trailing '/'. */
export function urlOf(endpoint: URL, relative: string, collection: boolean): string {
  const path = encodePath(relative);
  return endpoint.href + path + (collection && path !== "" ? "/" : "");
}

function decodeSegment(segment: string): string {
  try {
    return decodeURIComponent(segment);
  } catch {
    // A server that did not encode a literal '%': the raw text is the best guess.
    return segment;
  }
}

/** Decoded, non-empty path segments of a URL path. */
function segmentsOf(pathname: string): string[] {
  return pathname
    .split("/")
    .filter((s) => s !== "")
    .map(decodeSegment);
}

/**
 * The path of `href` relative to the endpoint ("" = the endpoint itself), or
 * null when it lies outside it. `href` may be a full URL or an absolute path.
 */
export function relativeFromHref(href: string, endpoint: URL): string | null {
  let pathname: string;
  try {
    pathname = new URL(href, endpoint).pathname;
  } catch {
    return null;
  }
  const base = segmentsOf(endpoint.pathname);
  const segments = segmentsOf(pathname);
  if (segments.length < base.length) return null;
  for (let i = 0; i < base.length; i++) if (segments[i] !== base[i]) return null;
  const rest = segments.slice(base.length);
  // A decoded '/' inside one segment, '.', '..' cannot be a key we wrote: skip such entries.
  if (rest.some((s) => s.includes("/") || s === "." || s === "..")) return null;
  return rest.join("/");
}

export function parentOf(relative: string): string {
  const slash = relative.lastIndexOf("/");
  return slash < 0 ? "" : relative.slice(0, slash);
}
