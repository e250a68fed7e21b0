import type { AppContext } from "../../context";
import { finishAuthorization, startAuthorization, startAuthorizationBody, takeAuthorizationResult } from "../../channels/oauth";
import { parseBody } from "../body";
import { sessionRoutes } from "../guard";

/** OAuth authorization of cloud-drive channels (spec 4.7); administrators only. */
export function channelOAuthRoutes(app: AppContext) {
  return sessionRoutes(app, "admin")
    .post("/api/admin/channel-oauth/start", ({ body, set, principal: p }) => {
      set.headers["cache-control"] = "no-store";
      return startAuthorization(app, p.user, parseBody(startAuthorizationBody, body));
    })
    .get("/api/admin/channel-oauth/callback", async ({ query, principal: p }) => {
      return finishAuthorization(app, p.user, query);
    })
    .get("/api/admin/channel-oauth/result", ({ query, set, principal: p }) => {
      set.headers["cache-control"] = "no-store";
      return takeAuthorizationResult(app, p.user, query);
    });
}
