import { Elysia } from "elysia";
import type { AppContext } from "../../context";
import { finishAuthorization, startAuthorization, takeAuthorizationResult } from "../../channels/oauth";
import { authenticate } from "../guard";

/** OAuth authorization of cloud-drive channels (spec 4.7); administrators only. */
export function channelOAuthRoutes(app: AppContext) {
  const admin = (request: Request) => authenticate(app, request, { admin: true });

  return new Elysia()
    .post("/api/admin/channel-oauth/start", ({ request, body, set }) => {
      const p = admin(request);
      set.headers["cache-control"] = "no-store";
      return startAuthorization(app, p.user, body);
    })
    .get("/api/admin/channel-oauth/callback", async ({ request, query }) => {
      const p = admin(request);
      return finishAuthorization(app, p.user, query);
    })
    .get("/api/admin/channel-oauth/result", ({ request, query, set }) => {
      const p = admin(request);
      set.headers["cache-control"] = "no-store";
      return takeAuthorizationResult(app, p.user, query);
    });
}
