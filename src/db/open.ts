import { Database } from "bun:sqlite";
import { MIGRATIONS, type Migration } from "./migrations";
import { BUSY_TIMEOUT_MS } from "./lock-breaker";
import { sqlTime } from "./time";
import { inWriteTransaction } from "./write-transaction";

export function openDatabase(path: string): Database {
  const db = new Database(path, { create: true, strict: true });
  db.exec("PRAGMA journal_mode = WAL");
  db.exec(`PRAGMA busy_timeout = ${BUSY_TIMEOUT_MS}`);
  db.exec("PRAGMA foreign_keys = ON");
  db.exec("PRAGMA synchronous = NORMAL");
  // SQLite's statement journals, sorts and transient indexes would otherwise be files in TMPDIR
  // (/tmp): a full /tmp made every upload fail with "disk full" while the data dir had room
  // (fault/full-tmpdir.test.ts), and an image row's journal spill cost ~45 µs in syscalls. The
  // statements run here are small and indexed (heavy reads run in workers on their own connection).
  db.exec("PRAGMA temp_store = MEMORY");
  return db;
}

export class SchemaTooNewError extends Error {}

/** One migration failed; it was rolled back whole. The message is Chinese, SQLite's own text the detail. */
export class MigrationFailedError extends Error {
  constructor(
    readonly migration: Migration,
    at: number,
    readonly cause: unknown,
  ) {
    super(
      `数据库结构迁移 ${migration.name}（第 ${migration.version} 步）失败，这一步已整体回滚，数据库结构版本停在 ${at}（详情：${(cause as Error)?.message ?? String(cause)}）`,
    );
  }
}

/** Highest migration recorded in the database; 0 for a new or pre-migration file. */
export function schemaVersion(db: Database): number {
  const table = db.query("SELECT 1 FROM sqlite_master WHERE type='table' AND name='schema_migrations'").get();
  if (!table) return 0;
  const row = db.query<{ v: number | null }, []>("SELECT MAX(version) AS v FROM schema_migrations").get();
  return row?.v ?? 0;
}

/** Whether SQLite's quick integrity check finds the database sound (it reads every page). */
export function passesQuickCheck(db: Database): boolean {
  return db.query<{ quick_check: string }, []>("PRAGMA quick_check(1)").get()?.quick_check === "ok";
}

/**
 * Applies each pending migration in its own transaction and records it. `onApplied` hears of each one
 * with how long it took: at a million images one step can take many seconds, before Kura listens.
 */
export function migrate(db: Database, migrations: Migration[] = MIGRATIONS, onApplied?: (m: Migration, ms: number) => void): number[] {
  const latest = migrations.at(-1)?.version ?? 0;
  const current = schemaVersion(db);
  if (current > latest) {
    throw new SchemaTooNewError(`数据库结构版本 ${current} 比本程序支持的 ${latest} 新，请升级 Kura 后再启动`);
  }
  db.exec("CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)");
  const applied: number[] = [];
  for (const m of migrations) {
    if (m.version <= current) continue;
    const started = performance.now();
    try {
      inWriteTransaction(db, () => {
        db.exec(m.sql);
        db.query("INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)").run(m.version, m.name, sqlTime());
      });
    } catch (err) {
      throw new MigrationFailedError(m, applied.at(-1) ?? current, err);
    }
    applied.push(m.version);
    onApplied?.(m, performance.now() - started);
  }
  return applied;
}
