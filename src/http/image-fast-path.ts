import type { AppContext } from "../context";
import { fastImageSegment, imageBySegment, NOT_FAST } from "../delivery/fast-path";
import { HotAnswers } from "../delivery/hot-answers";
import type { DeliveryRequest } from "../delivery/pipeline";
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
 *
 * A GET answered from memory is remembered whole (hot-answers.ts) until anything that could
 * change it does; the same GET then costs no pipeline at all, only its access count.
 */
export function imageFastPath(app: AppContext) {
  const warm = new HotAnswers(app.variants.hot, (id) => app.lookups.freshUntil(id));
  const forget = () => warm.clear();
  app.lookups.watch(forget);
  app.referers.watch(forget);
  app.settings.onChange(forget);

  return (request: Request, path: string, query: string, counted = false): Response | Promise<Response> | undefined => {
    // Only `/i/` answers are ever remembered: no other request pays for building a key.
    const key = path.startsWith("/i/") ? HotAnswers.keyOf(request) : undefined;
    const hit = key === undefined ? undefined : warm.answer(key);
    if (hit) {
      if (!counted) app.access.record(hit.imageId);
      if (hit.variant) app.variants.countHit();
      return hit.response;
    }
    const segment = fastImageSegment(request, path);
    if (segment === NOT_FAST) return undefined;
    const req: DeliveryRequest = { area: "i", request, isPublic: true, direct: true, counted, query, lookup: () => imageBySegment(app.lookups, segment) };
    const answer = serveImage(app, req);
    if (key !== undefined && req.prepared && answer instanceof Response) warm.remember(key, req.prepared);
    return answer;
  };
}
