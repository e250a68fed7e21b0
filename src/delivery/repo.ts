/** SQL of the referer_rules table (the hotlink allowlist). */
import type { Database } from "bun:sqlite";
import { sqlTime } from "../db/time";

export interface RefererRule {
  id: number;
  pattern: string;
  created_at: string;
}

export function listRefererRules(db: Database): RefererRule[] {
  return db.query<RefererRule, []>("SELECT id, pattern, created_at FROM referer_rules ORDER BY id").all();
}

export function refererPatterns(db: Database): string[] {
  return db
    .query<{ pattern: string }, []>("SELECT pattern FROM referer_rules")
    .all()
    .map((r) => r.pattern);
}

/** The new rule, or undefined when the pattern already exists. */
export function insertRefererRule(db: Database, pattern: string): RefererRule | undefined {
  const res = db.query("INSERT OR IGNORE INTO referer_rules (pattern, created_at) VALUES (?, ?)").run(pattern, sqlTime());
  if (res.changes === 0) return undefined;
  return db.query<RefererRule, [number]>("SELECT id, pattern, created_at FROM referer_rules WHERE id = ?").get(Number(res.lastInsertRowid))!;
}

export function deleteRefererRule(db: Database, id: number): boolean {
  return db.query("DELETE FROM referer_rules WHERE id = ?").run(id).changes > 0;
}
