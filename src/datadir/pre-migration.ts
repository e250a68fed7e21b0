import type { Database } from "bun:sqlite";
import { chmodSync } from "node:fs";
import { MIGRATIONS, type Migration } from "../db/migrations";
import { schemaVersion } from "../db/open";
import type { Logger } from "../ops/log";

/** `kura.db.before-migration-v4-20260102-030405.678`: next to the database, like the file a restore keeps. */
export function preMigrationName(dbPath: string, fromVersion: number, now = new Date()): string {
  const stamp = now.toISOString().replace(/[-:]/g, "").replace("T", "-").replace("Z", "");
  return `${dbPath}.before-migration-v${fromVersion}-${stamp}`;
}

/**
 * Migrations run one way, so before an upgrade touches an existing database a
 * consistent copy of it is written next to it (`VACUUM INTO`, mode 0600). A new
 * database (schema 0) or one already current gets none. Returns the copy's path.
 */
export function snapshotBeforeMigration(db: Database, dbPath: string, log: Logger, migrations: Migration[] = MIGRATIONS): string | undefined {
  const current = schemaVersion(db);
  const latest = migrations.at(-1)?.version ?? 0;
  if (current === 0 || current >= latest) return undefined;
  const target = preMigrationName(dbPath, current);
  db.run(`VACUUM INTO '${target.replaceAll("'", "''")}'`);
  chmodSync(target, 0o600);
  log.info("迁移数据库结构前已保存快照", { from: current, to: latest, snapshot: target });
  return target;
}
