import type { Database } from "bun:sqlite";
import { sqlTime } from "../db/time";

export interface RefererRule {
  id: number;
  pattern: string;
  created_at: string;
}

/**
 * The hotlink allowlist, cached in memory for the hot path and refreshed on every
 * change, so rule changes apply to the very next request.
 */
export class RefererRules {
  private patterns: string[] = [];

  constructor(private readonly db: Database) {
    this.refresh();
  }

  list(): RefererRule[] {
    return this.db.query<RefererRule, []>("SELECT id, pattern, created_at FROM referer_rules ORDER BY id").all();
  }

  current(): readonly string[] {
    return this.patterns;
  }

  /** undefined when the pattern already exists. */
  add(pattern: string): RefererRule | undefined {
    const res = this.db.query("INSERT OR IGNORE INTO referer_rules (pattern, created_at) VALUES (?, ?)").run(pattern, sqlTime());
    if (res.changes === 0) return undefined;
    this.refresh();
    return this.db.query<RefererRule, [number]>("SELECT id, pattern, created_at FROM referer_rules WHERE id = ?").get(Number(res.lastInsertRowid))!;
  }

  remove(id: number): boolean {
    const removed = this.db.query("DELETE FROM referer_rules WHERE id = ?").run(id).changes > 0;
    this.refresh();
    return removed;
  }

  private refresh() {
    this.patterns = this.db.query<{ pattern: string }, []>("SELECT pattern FROM referer_rules").all().map((r) => r.pattern);
  }
}
