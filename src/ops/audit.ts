import type { Database } from "bun:sqlite";
import { sqlTime } from "../db/time";

/** Every action the audit log records; the log's `action` filter matches these exactly. */
export type AuditAction =
  | "auth.login"
  | "channel.create"
  | "channel.delete"
  | "channel.export"
  | "channel.update"
  | "config.update"
  | "dedup.dismiss"
  | "dedup.merge"
  | "image.delete"
  | "image.expire"
  | "image.update"
  | "metadata.export"
  | "referer.create"
  | "referer.delete"
  | "token.create"
  | "token.delete"
  | "token.revoke"
  | "token.rotate"
  | "token.s3_credential"
  | "user.create"
  | "user.delete"
  | "user.password_change"
  | "user.password_reset"
  | "user.update";

export interface AuditActor {
  id: string;
  name: string;
}

/** Appends one audit entry. `detail` must never hold credential values (use set/empty markers). */
export function audit(db: Database, actor: AuditActor, action: AuditAction, target: string | number = "", detail: unknown = "") {
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
