import { Elysia } from "elysia";
import type { AppContext } from "../../context";
import { serveImage } from "../../delivery/serve-image";
import { imageBySegment } from "../../delivery/fast-path";
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

const trailingSlash = (request: Request) => new URL(request.url).pathname.endsWith("/");

export function publicRoutes(app: AppContext) {
  // The router also matches `/i/<id>/`: a second URL of the image that a CDN would keep for a
  // year after a delete (the purge names `/i/<id>` and `/i/<id>.<ext>` only). It is no image.
  const byId = (request: Request, id: string) =>
    serveImage(app, { area: "i", request, isPublic: true, lookup: () => (trailingSlash(request) ? undefined : imageBySegment(app.lookups, id)) });
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
