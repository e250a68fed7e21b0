import { Elysia } from "elysia";
import type { AppContext } from "../../context";
import { listOpenAlerts } from "../../ops/alerts";
import { audit } from "../../ops/audit";
import { adminDashboard, userDashboard } from "../../ops/dashboard";
import { metadataExportStream } from "../../ops/export-stream";
import { listAlerts, listAudit } from "../../ops/repo";
import { pagination, timestampQuery } from "../body";
import { badRequest } from "../errors";
import { sessionRoutes } from "../guard";

/** Operations views (spec 4.2, 4.11): the dashboard, alerts, the audit log and the metadata export. */
export function opsRoutes(app: AppContext) {
  const anyUser = sessionRoutes(app, "user").get("/api/admin/dashboard", ({ principal: p }) =>
    p.user.role === "admin" ? adminDashboard(app) : userDashboard(app, p.user.id),
  );
  const adminOnly = sessionRoutes(app, "admin")
    .get("/api/admin/export", ({ principal: p }) => {
      audit(app.db, p.user, "metadata.export");
      const stamp = new Date().toISOString().replace(/[-:]/g, "").replace(/\..*/, "");
      return new Response(metadataExportStream(app), {
        headers: {
          "content-type": "application/json; charset=utf-8",
          "content-disposition": `attachment; filename="kura-export-${stamp}.json"`,
          "cache-control": "no-store",
        },
      });
    })
    .get("/api/admin/alerts", ({ query }) => {
      if (query.status === undefined || query.status === "") {
        // Without status: every unresolved alert, unpaged.
        const items = listOpenAlerts(app);
        return { items, total: items.length };
      }
      if (query.status !== "all") throw badRequest("参数 status 只能是 all");
      const { pageSize, offset } = pagination(query);
      return listAlerts(app.db, { limit: pageSize, offset });
    })
    .get("/api/admin/audit", ({ query }) => {
      const { pageSize, offset } = pagination(query);
      const since = timestampQuery(query.since, "since");
      const until = timestampQuery(query.until, "until");
      return listAudit(app.db, { actor: query.actor, action: query.action, target: query.target, since, until }, { limit: pageSize, offset });
    });
  return new Elysia().use(anyUser).use(adminOnly);
}
