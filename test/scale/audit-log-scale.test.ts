/**
 * The audit log at a large size (audit 10 HIGH-3, MED-5): the sweep drops entries past their
 * retention in time slices, not one DELETE that held the loop 1-2 s at a million rows; and each
 * documented filter (exact actor, action, target, with or without a since/until window) walks an
 * index range in the list's order, with no table scan and no sort.
 */
import { expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { sqlTime } from "../../src/db/time";
import { sweepRound } from "../../src/images/sweep";
import { listAudit } from "../../src/ops/repo";
import { openContext } from "../helpers/context";
import { timeWithLoopPauses } from "../helpers/loop-pauses";

const OLD = 200_000;
const KEPT = 20_000;
const DAY = 86_400_000;

/** `count` rows by SQL alone (fast): actions and actors spread over a few values, created_at from `fromMs` a second apart. */
function seed(db: import("bun:sqlite").Database, count: number, fromMs: number) {
  db.query(
    `WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i + 1 < ?1)
     INSERT INTO audit (actor, actor_name, action, target, detail, created_at)
     SELECT 'u' || (i % 50), 'user', CASE i % 3 WHEN 0 THEN 'image.upload' WHEN 1 THEN 'image.delete' ELSE 'user.login' END,
            'g' || i, '', strftime('%Y-%m-%d %H:%M:%S', (?2 + i * 1000) / 1000, 'unixepoch') FROM n`,
  ).run(count, fromMs);
}

test(`the sweep drops ${OLD} audit entries past their retention in small steps (no long stall)`, async () => {
  const dir = mkdtempSync(join(tmpdir(), "kura-audit-prune-"));
  const ctx = await openContext(dir);
  try {
    const { app } = ctx;
    const now = Date.now();
    app.db.transaction(() => {
      seed(app.db, OLD, now - 100 * DAY);
      seed(app.db, KEPT, now - 10 * DAY);
    })();
    app.settings.update({ audit_retention_days: 30 });
    const before = app.db.query<{ n: number }, []>("SELECT count(*) AS n FROM audit").get()!.n;

    const { totalMs: total, longestPauseMs: longest } = await timeWithLoopPauses(() => sweepRound(app, now));
    console.log(`pruned ${OLD} audit entries in ${total.toFixed(0)} ms, longest loop pause ${longest.toFixed(1)} ms`);

    const cutoff = sqlTime(now - 30 * DAY);
    expect(app.db.query<{ n: number }, [string]>("SELECT count(*) AS n FROM audit WHERE created_at < ?").get(cutoff)!.n).toBe(0);
    // Only the old entries went (the settings save above wrote one more, which stays).
    expect(app.db.query<{ n: number }, []>("SELECT count(*) AS n FROM audit").get()!.n).toBe(before - OLD);
    // One DELETE is one pause as long as the prune; slices are ~10 ms each (a loaded machine adds pauses of its own).
    expect(longest).toBeLessThan(total / 3);
  } finally {
    ctx.close();
    rmSync(dir, { recursive: true, force: true });
  }
}, 120_000);

test("every audit filter walks an index in the list's order: no table scan, no sort", async () => {
  const dir = mkdtempSync(join(tmpdir(), "kura-audit-plan-"));
  const ctx = await openContext(dir);
  try {
    const { app } = ctx;
    seed(app.db, 20_000, Date.now() - 20 * DAY);
    app.db.run("ANALYZE");
    const plans: string[] = [];
    const query = app.db.query.bind(app.db);
    // Record the plan of every statement listAudit runs.
    app.db.query = ((sql: string) => {
      if (sql.includes("FROM audit"))
        plans.push(
          query(`EXPLAIN QUERY PLAN ${sql}`)
            .all(...new Array(sql.split("?").length - 1).fill("x"))
            .map((r) => (r as { detail: string }).detail)
            .join(" | "),
        );
      return query(sql);
    }) as typeof app.db.query;
    const cases = [
      { action: "image.upload" },
      { actor: "u7" },
      { target: "g12345" },
      { action: "image.upload", since: "2026-01-01 00:00:00" },
      { actor: "u7", until: "2030-01-01 00:00:00" },
      { target: "g1", since: "2026-01-01 00:00:00", until: "2030-01-01 00:00:00" },
      { actor: "u7", action: "image.delete" },
      {},
      { since: "2026-01-01 00:00:00" },
    ];
    for (const q of cases) {
      plans.length = 0;
      expect(listAudit(app.db, q, { limit: 20, offset: 0 }).total).toBeGreaterThan(0);
      expect(plans).toHaveLength(2);
      for (const plan of plans) {
        expect(plan).not.toMatch(/SCAN audit(?! USING)/);
        expect(plan).not.toContain("TEMP B-TREE");
      }
      // The filtered ones use their own index.
      if (q.action || q.actor || q.target) for (const plan of plans) expect(plan).toMatch(/USING (COVERING )?INDEX audit_(action|actor|target)/);
    }
    app.db.query = query;
    // Newest first.
    const page = listAudit(app.db, { action: "image.upload" }, { limit: 50, offset: 0 }).items.map((r) => String(r.created_at));
    expect(page).toEqual([...page].sort().reverse());
  } finally {
    ctx.close();
    rmSync(dir, { recursive: true, force: true });
  }
}, 60_000);
