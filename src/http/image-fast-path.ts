import type { AppContext } from "../context";
import { fastImageSegment, imageBySegment, NOT_FAST } from "../delivery/fast-path";
import { serveImage } from "../delivery/serve-image";

export { IMAGE_ROUTE } from "../delivery/fast-path";

/**
 * `GET`/`HEAD /i/<segment>` answered without the general router: public delivery is the
 * request the service gets most, and the router's context building and the per-request
 * client-address work cost as much CPU as serving the bytes (bench/README.md, "Where the
 * time goes"). Delivery needs neither the client address nor a parsed body. Returns
 * undefined for anything the router must see (other paths, a body, a nested path).
 * The answer is a plain Response when the row and the bytes are in memory (no promise), and
 * already carries nosniff and its HEAD length (`direct`). Throws for a bad `w`/`format`.
 * `counted`: a delivery thread handed the request over and already counted the access.
 */
export function imageFastPath(app: AppContext) {
  return (request: Request, path: string, query: string, counted = false): Response | Promise<Response> | undefined => {
    const segment = fastImageSegment(request, path);
    if (segment === NOT_FAST) return undefined;
    return serveImage(app, { area: "i", request, isPublic: true, direct: true, counted, query, lookup: () => imageBySegment(app.lookups, segment) });
  };
}
