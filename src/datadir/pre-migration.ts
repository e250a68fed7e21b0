import type { Database } from "bun:sqlite";
import { chmodSync, existsSync, readdirSync, rmSync, statfsSync } from "node:fs";
import { basename, dirname, join } from "node:path";
import { deleteMeta, hasMetaTable, readMeta, writeMeta } from "../db/meta";
import { MIGRATIONS, type Migration } from "../db/migrations";
import { schemaVersion } from "../db/open";
import type { Logger } from "../ops/log";
import { BEFORE_MIGRATION_KEEP, pruneDatabaseCopies } from "../ops/restore-copies";
import { renameDurably } from "../shared/durable-file";

/** `kura.db.before-migration-v4-20260102-030405.678`: next to the database, like the file a restore keeps. */
export function preMigrationName(dbPath: string, fromVersion: number, now = new Date()): string {
  const stamp = now.toISOString().replace(/[-:]/g, "").replace("T", "-").replace("Z", "");
  return `${dbPath}.before-migration-v${fromVersion}-${stamp}`;
}

/** A copy being written: only a complete one is renamed to the trusted name. */
const PARTIAL_SUFFIX = ".partial";

/**
 * Meta key written into the database right after its copy, removed when every migration has run:
 * `{"from":5,"copy":"…v5-…"}`. Still there at a start means that upgrade did not finish (killed,
 * a migration failing), and its copy, of the user's real pre-upgrade state, is the one to keep.
 */
export const UPGRADE_MARKER = "upgrade_in_progress";

/** Removes copies a kill left half written (`….partial` and SQLite's `….partial-journal`). */
function removePartialCopies(dbPath: string): void {
  const dir = dirname(dbPath);
  const prefix = `${basename(dbPath)}.before-migration-`;
  for (const f of readdirSync(dir)) {
    if (f.startsWith(prefix) && (f.endsWith(PARTIAL_SUFFIX) || f.endsWith(`${PARTIAL_SUFFIX}-journal`))) rmSync(join(dir, f), { force: true });
  }
}

/** The copy an unfinished upgrade of this database already made, if it is still there. */
function unfinishedUpgradeCopy(db: Database): { from: number; copy: string } | undefined {
  if (!hasMetaTable(db)) return undefined;
  const raw = readMeta(db, UPGRADE_MARKER);
  if (!raw) return undefined;
  try {
    const marker = JSON.parse(raw) as { from: number; copy: string };
    return existsSync(marker.copy) ? marker : undefined;
  } catch {
    return undefined;
  }
}

const MIB = 1024 * 1024;

/**
 * Ends the start before the copy when the disk cannot hold it: under `Restart=always` each start
 * would otherwise write the whole copy until the disk was full, delete it and fail, every 2 s.
 * The copy holds the database's used pages; 1 MiB more leaves room for its journal.
 */
function refuseWithoutRoomForCopy(db: Database, dir: string): void {
  const pragma = (name: string) => (db.query(`PRAGMA ${name}`).values()[0]?.[0] as number | undefined) ?? 0;
  const needed = (pragma("page_count") - pragma("freelist_count")) * pragma("page_size") + MIB;
  const fs = statfsSync(dir);
  const free = fs.bavail * fs.bsize;
  if (free >= needed) return;
  const mib = (bytes: number) => `${Math.ceil(bytes / MIB)} MiB`;
  throw new Error(`磁盘空间不足：升级前需在 ${dir} 保存一份数据库副本（约 ${mib(needed)}），可用仅 ${mib(free)}；数据库未改动，请腾出空间后再启动`);
}

/**
 * Migrations run one way, so before an upgrade touches an existing database a
 * consistent copy of it is written next to it (`VACUUM INTO`, mode 0600), under a temporary
 * name renamed once complete and synced. A new database (schema 0) or one already current gets
 * none, nor does one whose upgrade was begun and not finished (its copy of the real old version
 * is kept; another of a half-upgraded state would only fill the disk). Only the newest
 * BEFORE_MIGRATION_KEEP copies are kept. Returns the copy's path.
 */
export function snapshotBeforeMigration(db: Database, dbPath: string, log: Logger, migrations: Migration[] = MIGRATIONS): string | undefined {
  const current = schemaVersion(db);
  const latest = migrations.at(-1)?.version ?? 0;
  if (current === 0 || current >= latest) return undefined;
  removePartialCopies(dbPath);
  const unfinished = unfinishedUpgradeCopy(db);
  if (unfinished) {
    log.warn("上次升级未完成，保留那次升级前的数据库副本，不再另存", { from: unfinished.from, current, to: latest, snapshot: unfinished.copy });
    return unfinished.copy;
  }
  const target = preMigrationName(dbPath, current);
  const partial = target + PARTIAL_SUFFIX;
  refuseWithoutRoomForCopy(db, dirname(dbPath));
  try {
    db.run(`VACUUM INTO '${partial.replaceAll("'", "''")}'`);
    chmodSync(partial, 0o600);
    renameDurably(partial, target);
  } finally {
    rmSync(partial, { force: true });
    rmSync(`${partial}-journal`, { force: true });
  }
  if (hasMetaTable(db)) writeMeta(db, UPGRADE_MARKER, JSON.stringify({ from: current, copy: target }));
  log.info("迁移数据库结构前已保存快照", { from: current, to: latest, snapshot: target });
  pruneDatabaseCopies(dbPath, "before-migration", target, log, BEFORE_MIGRATION_KEEP);
  return target;
}

/** After every migration ran: the upgrade is finished, the next one gets its own copy. */
export function finishUpgrade(db: Database): void {
  if (hasMetaTable(db) && readMeta(db, UPGRADE_MARKER) !== undefined) deleteMeta(db, UPGRADE_MARKER);
}
