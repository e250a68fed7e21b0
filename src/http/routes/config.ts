import { Elysia } from "elysia";
import type { AppContext } from "../../context";
import { SettingsValidationError } from "../../config/settings";
import { configAuditDetail, fullConfig, publicConfig } from "../../config/views";
import { audit } from "../../ops/audit";
import { requireWellFormedText } from "../body";
import { badRequest } from "../errors";
import { sessionRoutes } from "../guard";

export function configRoutes(app: AppContext) {
  const anyUser = sessionRoutes(app, "user").get("/api/admin/config", () => publicConfig(app.settings.get()));
  const adminOnly = sessionRoutes(app, "admin")
    .get("/api/admin/config/full", () => fullConfig(app))
    .put("/api/admin/config", ({ body, principal: p }) => {
      if (body === null || typeof body !== "object" || Array.isArray(body)) throw badRequest("请求体必须是 JSON 对象");
      requireWellFormedText(body);
      let changed: string[];
      try {
        changed = app.settings.update(body);
      } catch (err) {
        if (err instanceof SettingsValidationError) throw badRequest(err.message);
        throw err;
      }
      if (changed.length > 0) {
        const patch = body as Record<string, unknown>;
        audit(app.db, p.user, "config.update", "", configAuditDetail(Object.fromEntries(changed.map((k) => [k, patch[k]]))));
      }
      return fullConfig(app);
    });
  return new Elysia().use(anyUser).use(adminOnly);
}
