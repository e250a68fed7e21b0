import { Elysia } from "elysia";
import type { AppContext } from "../../context";
import { listOpenAlerts } from "../../ops/alerts";
import { audit } from "../../ops/audit";
import { adminDashboard, userDashboard } from "../../ops/dashboard";
import { metadataExportStream } from "../../ops/export-stream";
import { pagination, timestampQuery } from "../body";
import { badRequest } from "../errors";
import { authenticate } from "../guard";

const ALERT_COLUMNS = "id, kind, target, message, opened_at, resolved_at";
const AUDIT_COLUMNS = "id, actor, actor_name, action, target, detail, created_at";


/** Operations views (spec 4.2, 4.11): the dashboard, alerts, the audit log and the metadata export. */
export function opsRoutes(app: AppContext) {
  return new Elysia()
    .get("/api/admin/dashboard", ({ request }) => {
      const p = authenticate(app, request);
      return p.user.role === "admin" ? adminDashboard(app) : userDashboard(app, p.user.id);
    })
    .get("/api/admin/export", ({ request }) => {
      const p = authenticate(app, request, { admin: true });
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
    .get("/api/admin/alerts", ({ request, query }) => {
      authenticate(app, request, { admin: true });
      if (query.status === undefined || query.status === "") {
        // Without status: every unresolved alert, unpaged.
        const items = listOpenAlerts(app);
        return { items, total: items.length };
      }
      if (query.status !== "all") throw badRequest("参数 status 只能是 all");
      const { pageSize, offset } = pagination(query);
      const total = app.db.query<{ n: number }, []>("SELECT COUNT(*) AS n FROM alerts").get()!.n;
      const items = app.db.query(`SELECT ${ALERT_COLUMNS} FROM alerts ORDER BY id DESC LIMIT ? OFFSET ?`).all(pageSize, offset);
      return { items, total };
    })
    .get("/api/admin/audit", ({ request, query }) => {
      authenticate(app, request, { admin: true });
      const { pageSize, offset } = pagination(query);
      const where: string[] = [];
      const args: string[] = [];
      for (const field of ["actor", "action", "target"] as const) {
        const value = query[field];
        if (value !== undefined && value !== "") where.push(`${field} = ?`), args.push(value);
      }
      const since = timestampQuery(query.since, "since");
      const until = timestampQuery(query.until, "until");
      if (since) where.push("created_at >= ?"), args.push(since);
      if (until) where.push("created_at < ?"), args.push(until);
      const clause = where.length ? `WHERE ${where.join(" AND ")}` : "";
      const total = app.db.query<{ n: number }, string[]>(`SELECT COUNT(*) AS n FROM audit ${clause}`).get(...args)!.n;
      const items = app.db
        .query<Record<string, unknown>, (string | number)[]>(`SELECT ${AUDIT_COLUMNS} FROM audit ${clause} ORDER BY id DESC LIMIT ? OFFSET ?`)
        .all(...args, pageSize, offset);
      return { items, total };
    });
}
