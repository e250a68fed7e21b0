/**
 * SQL of the operations tables: the audit log (written and listed), the alerts history
 * as the admin views page through it, webhook delivery state, and the open alerts that
 * ops/alerts.ts opens, refreshes and resolves.
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

/**
 * Drops up to `limit` audit entries written before `before` (SQL time), past their retention,
 * oldest first along audit_created; returns how many. The sweep drains them in time slices
 * (db/sliced.ts): one DELETE of a lowered retention's ~300k rows held the loop 1-2 s at 1M rows.
 */
export function pruneAuditBatch(db: Database, before: string, limit: number): number {
  return db.query("DELETE FROM audit WHERE id IN (SELECT id FROM audit WHERE created_at < ? ORDER BY created_at LIMIT ?)").run(before, limit).changes;
}

/** Every alert ever opened, newest first. */
export function listAlerts(db: Database, page: Page): { items: unknown[]; total: number } {
  const total = db.query<{ n: number }, []>("SELECT COUNT(*) AS n FROM alerts").get()!.n;
  const items = db.query(`SELECT ${ALERT_COLUMNS} FROM alerts ORDER BY id DESC LIMIT ? OFFSET ?`).all(page.limit, page.offset);
  return { items, total };
}

/**
 * Audit entries matching the query, newest first (ties by id). Each exact filter has an index
 * ending in created_at (migration 0012), so the page and its COUNT walk one index range.
 */
export function listAudit(db: Database, q: AuditQuery, page: Page): { items: Record<string, unknown>[]; total: number } {
  const where: string[] = [];
  const args: string[] = [];
  for (const field of ["actor", "action", "target"] as const) {
    const value = q[field];
    if (value !== undefined && value !== "") {
      where.push(`${field} = ?`);
      args.push(value);
    }
  }
  if (q.since) {
    where.push("created_at >= ?");
    args.push(q.since);
  }
  if (q.until) {
    where.push("created_at < ?");
    args.push(q.until);
  }
  const clause = where.length ? `WHERE ${where.join(" AND ")}` : "";
  const total = db.query<{ n: number }, string[]>(`SELECT COUNT(*) AS n FROM audit ${clause}`).get(...args)!.n;
  const items = db
    .query<Record<string, unknown>, (string | number)[]>(`SELECT ${AUDIT_COLUMNS} FROM audit ${clause} ORDER BY created_at DESC, id DESC LIMIT ? OFFSET ?`)
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

/** The id of the open alert of this kind and target, if any (a partial unique index allows one). */
export function openAlertId(db: Database, kind: string, target: string): number | undefined {
  return db.query<{ id: number }, [string, string]>("SELECT id FROM alerts WHERE kind = ? AND target = ? AND resolved_at = ''").get(kind, target)?.id;
}

export function setAlertMessage(db: Database, id: number, message: string): void {
  db.query("UPDATE alerts SET message = ? WHERE id = ?").run(message, id);
}

export function insertAlert(db: Database, alert: { kind: string; target: string; message: string; openedAt: string; openDelivered: boolean }): void {
  db.query("INSERT INTO alerts (kind, target, message, opened_at, open_delivered) VALUES (?, ?, ?, ?, ?)").run(
    alert.kind,
    alert.target,
    alert.message,
    alert.openedAt,
    alert.openDelivered ? 1 : 0,
  );
}

/**
 * Resolves the open alert of this kind and target; returns how many rows changed (0 or 1). A
 * resolve never sent (no webhook now) takes an open still waiting with it: sent alone later, it
 * told the receiver of an alert that stayed open there for good (spec 6.1: the open comes
 * before the resolve, and a receiver should see both or neither).
 */
export function resolveOpenAlert(db: Database, kind: string, target: string, resolvedAt: string, delivered: boolean): number {
  const sent = delivered ? 1 : 0;
  return db
    .query(
      "UPDATE alerts SET resolved_at = ?1, resolved_delivered = ?2, open_delivered = MAX(open_delivered, ?2) WHERE kind = ?3 AND target = ?4 AND resolved_at = ''",
    )
    .run(resolvedAt, sent, kind, target).changes;
}

export interface OpenAlertRow {
  id: number;
  kind: string;
  target: string;
  message: string;
  opened_at: string;
  resolved_at: string;
}

/** Every unresolved alert, newest first. */
export function selectOpenAlerts(db: Database): OpenAlertRow[] {
  return db.query<OpenAlertRow, []>(`SELECT ${ALERT_COLUMNS} FROM alerts WHERE resolved_at = '' ORDER BY id DESC`).all();
}

export function openAlertTargets(db: Database, kind: string): string[] {
  return db
    .query<{ target: string }, [string]>("SELECT target FROM alerts WHERE kind = ? AND resolved_at = ''")
    .all(kind)
    .map((r) => r.target);
}

/** Each channel's health and rollup counts, for the channel alert kinds. */
export interface ChannelAlertState {
  name: string;
  healthy: number;
  last_checked_at: string;
  last_error: string;
  deleting: number;
  failed: number;
  bytes: number;
}

export function channelAlertStates(db: Database): ChannelAlertState[] {
  return db
    .query<ChannelAlertState, []>(
      `SELECT c.name, c.healthy, c.last_checked_at, c.last_error, c.deleting,
              COALESCE(cu.failed, 0) AS failed, COALESCE(cu.bytes, 0) AS bytes
       FROM channels c LEFT JOIN channel_usage cu ON cu.channel_id = c.id`,
    )
    .all();
}
