import { Elysia } from "elysia";
import type { AppContext } from "../../context";
import { SettingsValidationError } from "../../config/settings";
import { configAuditDetail, fullConfig, publicConfig } from "../../config/views";
import { audit } from "../../ops/audit";
import { badRequest } from "../errors";
import { authenticate } from "../guard";

export function configRoutes(app: AppContext) {
  return new Elysia()
    .get("/api/admin/config", ({ request }) => {
      authenticate(app, request);
      return publicConfig(app.settings.get());
    })
    .get("/api/admin/config/full", ({ request }) => {
      authenticate(app, request, { admin: true });
      return fullConfig(app);
    })
    .put("/api/admin/config", ({ request, body }) => {
      const p = authenticate(app, request, { admin: true });
      if (body === null || typeof body !== "object" || Array.isArray(body)) throw badRequest("请求体必须是 JSON 对象");
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
}
