import type { AppContext } from "../context";
import { serveImage } from "../delivery/serve-image";
import { imageByIdSegment } from "./routes/public";

/** The route template metrics record for `/i/` requests (the router's own path for them). */
export const IMAGE_ROUTE = "/i/:id";

/**
 * `GET`/`HEAD /i/<segment>` answered without the general router: public delivery is the
 * request the service gets most, and the router's context building and the per-request
 * client-address work cost as much CPU as serving the bytes (bench/README.md, "Where the
 * time goes"). Delivery needs neither the client address nor a parsed body. Returns
 * undefined for anything the router must see (other paths, a body, a nested path).
 * The answer is a plain Response when the row and the bytes are in memory (no promise), and
 * already carries nosniff and its HEAD length (`direct`). Throws for a bad `w`/`format`.
 */
export function imageFastPath(app: AppContext) {
  return (request: Request, path: string, query: string): Response | Promise<Response> | undefined => {
    const method = request.method;
    if ((method !== "GET" && method !== "HEAD") || !path.startsWith("/i/") || request.body) return undefined;
    const raw = path.slice(3);
    if (raw === "" || raw.includes("/")) return undefined;
    const segment = decodeSegment(raw);
    return serveImage(app, { area: "i", request, isPublic: true, direct: true, query, lookup: () => imageByIdSegment(app, segment) });
  };
}

/** Like the router: a segment that is not valid percent-encoding becomes no parameter (a plain 404). */
function decodeSegment(raw: string): string | undefined {
  if (!raw.includes("%")) return raw;
  try {
    return decodeURIComponent(raw);
  } catch {
    return undefined;
  }
}
