import type { ImageView } from "../images/repo";
import { imageExtension } from "../shared/links";

/** The route template metrics record for `/i/` requests (the router's own path for them). */
export const IMAGE_ROUTE = "/i/:id";

/** Not a `/i/` fast-path request: the router (or the main thread) must see it. */
export const NOT_FAST = null;

/**
 * The segment of a `GET`/`HEAD /i/<segment>` without a body, percent-decoded (undefined when
 * the encoding is invalid: the router then has no parameter either, a plain 404), or NOT_FAST
 * for anything else (other methods and paths, a body, a nested path).
 */
export function fastImageSegment(request: Request, path: string): string | undefined | typeof NOT_FAST {
  const method = request.method;
  if ((method !== "GET" && method !== "HEAD") || !path.startsWith("/i/") || request.body) return NOT_FAST;
  const raw = path.slice(3);
  if (raw === "" || raw.includes("/")) return NOT_FAST;
  if (!raw.includes("%")) return raw;
  try {
    return decodeURIComponent(raw);
  } catch {
    return undefined;
  }
}

/**
 * `/i/<id>` or `/i/<id>.<ext>`: the extension form (for forums that want one) is the same
 * image, but only with the image's own extension, so each image has exactly one such URL
 * (and the CDN purge knows it).
 */
export function imageBySegment(lookups: { byId(id: string): ImageView | undefined }, segment: string | undefined): ImageView | undefined {
  // The router leaves the parameter empty when the segment is not valid percent-encoding.
  if (typeof segment !== "string") return undefined;
  const dot = segment.indexOf(".");
  if (dot < 0) return lookups.byId(segment);
  const view = lookups.byId(segment.slice(0, dot));
  return view && imageExtension(view.mime) === segment.slice(dot + 1) ? view : undefined;
}
