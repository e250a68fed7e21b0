// Strong ETags of delivered images (spec 4.5 rule 2) and If-None-Match evaluation.
// The tags are derived from content (sha256) plus the variant parameters, so they are
// stable across restarts, channels and instances without storing anything.

import { parseHttpDate } from "../shared/http-date";

export function originalEtag(sha256: string): string {
  return `"${sha256}"`;
}

/** `width` is 0 when the variant only changes the format; `profile` is the render's (render-profile.ts). */
export function variantEtag(sha256: string, width: number, format: string, profile: string): string {
  return `"${sha256}-${width}-${format}-${profile}"`;
}

/**
 * RFC 9110 13.1.2: If-None-Match uses the weak comparison, i.e. `W/"x"` matches `"x"`,
 * and `*` matches any current representation (the caller only asks when the image exists).
 */
export function ifNoneMatchMatches(header: string | null | undefined, etag: string): boolean {
  if (!header) return false;
  if (header.trim() === "*") return true;
  const wanted = opaqueTag(etag);
  for (const tag of parseEntityTagList(header)) {
    if (tag === "*" || opaqueTag(tag) === wanted) return true;
  }
  return false;
}

/**
 * Splits `#entity-tag` respecting quotes: the opaque part of a tag may itself contain commas.
 * Unquoted members (sent by some broken clients) are kept as written and compared as if quoted.
 */
export function parseEntityTagList(header: string): string[] {
  const tags: string[] = [];
  let i = 0;
  while (i < header.length) {
    while (i < header.length && (header[i] === "," || header[i] === " " || header[i] === "\t")) i++;
    if (i >= header.length) break;
    const start = i;
    if (header.startsWith("W/", i)) i += 2;
    if (header[i] === '"') {
      const close = header.indexOf('"', i + 1);
      i = close < 0 ? header.length : close + 1;
    } else {
      while (i < header.length && header[i] !== ",") i++;
    }
    tags.push(header.slice(start, i).trim());
    while (i < header.length && header[i] !== ",") i++; // skip junk after a closing quote
  }
  return tags;
}

function opaqueTag(tag: string): string {
  let t = tag.startsWith("W/") ? tag.slice(2) : tag;
  if (t.length >= 2 && t.startsWith('"') && t.endsWith('"')) t = t.slice(1, -1);
  return t;
}

/**
 * RFC 9110 13.1.5: a Range applies only while If-Range still names the current representation,
 * by strong comparison (a weak tag never matches) or by the exact Last-Modified date; otherwise
 * the whole body is sent. An `/o/` alias can be re-pointed between two requests of a resumed
 * download, which then got the new image's bytes joined onto the old one's (or a 416).
 */
export function ifRangeAllows(header: string | null | undefined, etag: string, lastModified: string | undefined): boolean {
  if (!header) return true;
  const value = header.trim();
  if (value.startsWith('"')) return value === etag;
  if (value.startsWith("W/")) return false;
  return lastModified !== undefined && value === lastModified;
}

/**
 * RFC 9110 13.1.3: without If-None-Match (which takes precedence), If-Modified-Since makes a 304
 * when the representation has not changed since that date; anything but an HTTP-date is ignored. A
 * cache or client that revalidates `/o/` (no-cache) by date alone got the whole body each time.
 */
export function notModifiedSince(ifNoneMatch: string | null, ifModifiedSince: string | null, lastModified: string | undefined): boolean {
  if (ifNoneMatch !== null || !ifModifiedSince || lastModified === undefined) return false;
  const since = parseHttpDate(ifModifiedSince);
  return since !== undefined && Date.parse(lastModified) <= since;
}
