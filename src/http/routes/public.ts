import { Elysia } from "elysia";
import type { AppContext } from "../../context";
import { serveImage } from "../../delivery/serve-image";
import { imageExtension } from "../../shared/links";
import { sessionRoutes } from "../guard";

/** `/o/<user_id>/<object_key…>` → the two parts, percent-decoded per segment. */
function splitAlias(rest: string): { userId: string; key: string } | undefined {
  const slash = rest.indexOf("/");
  if (slash <= 0 || slash === rest.length - 1) return undefined;
  try {
    return {
      userId: decodeURIComponent(rest.slice(0, slash)),
      key: rest
        .slice(slash + 1)
        .split("/")
        .map(decodeURIComponent)
        .join("/"),
    };
  } catch {
    return undefined;
  }
}

/**
 * `/i/<id>` or `/i/<id>.<ext>`: the extension form (for forums that want one) is the same
 * image, but only with the image's own extension, so each image has exactly one such URL
 * (and the CDN purge knows it).
 */
export function imageByIdSegment(app: AppContext, segment: string | undefined) {
  // The router leaves the parameter empty when the segment is not valid percent-encoding.
  if (typeof segment !== "string") return undefined;
  const dot = segment.indexOf(".");
  if (dot < 0) return app.lookups.byId(segment);
  const view = app.lookups.byId(segment.slice(0, dot));
  return view && imageExtension(view.mime) === segment.slice(dot + 1) ? view : undefined;
}

export function publicRoutes(app: AppContext) {
  const byId = (request: Request, id: string) => serveImage(app, { area: "i", request, isPublic: true, lookup: () => imageByIdSegment(app, id) });
  const byAlias = (request: Request, rest: string) =>
    serveImage(app, {
      area: "o",
      request,
      isPublic: true,
      lookup: () => {
        const alias = splitAlias(rest);
        return alias ? app.lookups.byAlias(alias.userId, alias.key) : undefined;
      },
    });

  // Authentication errors stay JSON (the guard runs first); image errors from here on are plain text.
  const thumbnails = sessionRoutes(app, "user").get("/api/admin/images/:id/thumb", ({ request, params, principal: p }) =>
    serveImage(app, {
      area: "thumb",
      request,
      isPublic: false,
      lookup: () => {
        const v = app.images.view(params.id);
        return v && (p.user.role === "admin" || v.user_id === p.user.id) ? v : undefined;
      },
    }),
  );

  // Elysia routes HEAD to these GET handlers; serveImage answers HEAD without a body.
  return new Elysia()
    .get("/i/:id", ({ request, params }) => byId(request, params.id))
    .get("/o/*", ({ request, params }) => byAlias(request, params["*"]))
    .use(thumbnails);
}
