/**
 * SQL of the operations tables: the audit log (written and listed), the alerts history
 * as the admin views page through it, and webhook delivery state. ops/alerts.ts still keeps
 * its own statements (see the pending list in test/contract/sql-placement.test.ts).
 */
import type { Database } from "bun:sqlite";

const ALERT_COLUMNS = "id, kind, target, message, opened_at, resolved_at";
const AUDIT_COLUMNS = "id, actor, actor_name, action, target, detail, created_at";

export interface Page {
  limit: number;
  offset: number;
}

/** Audit log filter: exact actor / action / target, and a created_at window [since, until). */
export interface AuditQuery {
  actor?: string;
  action?: string;
  target?: string;
  since?: string;
  until?: string;
}

export interface AuditEntry {
  actor: string;
  actorName: string;
  action: string;
  target: string;
  detail: string;
  createdAt: string;
}

export function insertAudit(db: Database, e: AuditEntry): void {
  db.query("INSERT INTO audit (actor, actor_name, action, target, detail, created_at) VALUES (?, ?, ?, ?, ?, ?)").run(
    e.actor,
    e.actorName,
    e.action,
    e.target,
    e.detail,
    e.createdAt,
  );
}

/** Every alert ever opened, newest first. */
export function listAlerts(db: Database, page: Page): { items: unknown[]; total: number } {
  const total = db.query<{ n: number }, []>("SELECT COUNT(*) AS n FROM alerts").get()!.n;
  const items = db.query(`SELECT ${ALERT_COLUMNS} FROM alerts ORDER BY id DESC LIMIT ? OFFSET ?`).all(page.limit, page.offset);
  return { items, total };
}

/** Audit entries matching the query, newest first. */
export function listAudit(db: Database, q: AuditQuery, page: Page): { items: Record<string, unknown>[]; total: number } {
  const where: string[] = [];
  const args: string[] = [];
  for (const field of ["actor", "action", "target"] as const) {
    const value = q[field];
    if (value !== undefined && value !== "") where.push(`${field} = ?`), args.push(value);
  }
  if (q.since) where.push("created_at >= ?"), args.push(q.since);
  if (q.until) where.push("created_at < ?"), args.push(q.until);
  const clause = where.length ? `WHERE ${where.join(" AND ")}` : "";
  const total = db.query<{ n: number }, string[]>(`SELECT COUNT(*) AS n FROM audit ${clause}`).get(...args)!.n;
  const items = db
    .query<Record<string, unknown>, (string | number)[]>(`SELECT ${AUDIT_COLUMNS} FROM audit ${clause} ORDER BY id DESC LIMIT ? OFFSET ?`)
    .all(...args, page.limit, page.offset);
  return { items, total };
}

/** An alert with a webhook delivery still owed (its opening, or its resolution). */
export interface PendingAlert {
  id: number;
  kind: string;
  target: string;
  message: string;
  opened_at: string;
  resolved_at: string;
  open_delivered: number;
  resolved_delivered: number;
}

export function undeliveredAlerts(db: Database): PendingAlert[] {
  return db
    .query<PendingAlert, []>(
      `SELECT id, kind, target, message, opened_at, resolved_at, open_delivered, resolved_delivered
       FROM alerts WHERE open_delivered = 0 OR (resolved_at != '' AND resolved_delivered = 0) ORDER BY id`,
    )
    .all();
}

/** The alert's current message (an evaluation may have refreshed it since it was listed). */
export function alertMessage(db: Database, id: number): string | undefined {
  return db.query<{ message: string }, [number]>("SELECT message FROM alerts WHERE id = ?").get(id)?.message;
}

export function markAlertDelivered(db: Database, id: number, status: "open" | "resolved"): void {
  const column = status === "open" ? "open_delivered" : "resolved_delivered";
  db.query(`UPDATE alerts SET ${column} = 1 WHERE id = ?`).run(id);
}
