import type { Database } from "bun:sqlite";
import { deleteRefererRule, insertRefererRule, listRefererRules, type RefererRule, refererPatterns } from "./repo";

export type { RefererRule };

/**
 * The hotlink allowlist, cached in memory for the hot path and refreshed on every
 * change, so rule changes apply to the very next request.
 */
export class RefererRules {
  private patterns: string[] = [];
  private readonly watchers: ((patterns: readonly string[]) => void)[] = [];

  constructor(private readonly db: Database) {
    this.refresh();
  }

  list(): RefererRule[] {
    return listRefererRules(this.db);
  }

  current(): readonly string[] {
    return this.patterns;
  }

  /** undefined when the pattern already exists. */
  add(pattern: string): RefererRule | undefined {
    const rule = insertRefererRule(this.db, pattern);
    if (rule) this.refresh();
    return rule;
  }

  remove(id: number): boolean {
    const removed = deleteRefererRule(this.db, id);
    this.refresh();
    return removed;
  }

  /** Told of every change (the delivery threads keep a copy, the warm-answer memo forgets). */
  watch(watcher: (patterns: readonly string[]) => void) {
    this.watchers.push(watcher);
  }

  private refresh() {
    this.patterns = refererPatterns(this.db);
    for (const watcher of this.watchers) watcher(this.patterns);
  }
}
