import type { Database } from "bun:sqlite";
import { sqlTime } from "../db/time";

export interface AuditActor {
  id: string;
  name: string;
}

/** Appends one audit entry. `detail` must never hold credential values (use set/empty markers). */
export function audit(db: Database, actor: AuditActor, action: string, target: string | number = "", detail: unknown = "") {
  const text = typeof detail === "string" ? detail : JSON.stringify(detail);
  db.query("INSERT INTO audit (actor, actor_name, action, target, detail, created_at) VALUES (?, ?, ?, ?, ?, ?)").run(
    actor.id,
    actor.name,
    action,
    String(target),
    text,
    sqlTime(),
  );
}

export const SYSTEM_ACTOR: AuditActor = { id: "system", name: "system" };
