import type { Database } from "bun:sqlite";
import { sqlTime } from "../db/time";
import { insertAudit } from "./repo";

/** Every action the audit log records; the log's `action` filter matches these exactly. */
export type AuditAction =
  | "auth.login"
  | "auth.session_end"
  | "backup.create"
  | "backup.download"
  | "backup.restore"
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
  insertAudit(db, { actor: actor.id, actorName: actor.name, action, target: String(target), detail: text, createdAt: sqlTime() });
}

export const SYSTEM_ACTOR: AuditActor = { id: "system", name: "system" };
