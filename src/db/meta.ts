/** The meta table: small key/value flags and markers (seed flags, key fingerprint, job progress). */
import type { Database } from "bun:sqlite";

export function readMeta(db: Database, key: string): string | undefined {
  return db.query<{ value: string }, [string]>("SELECT value FROM meta WHERE key = ?").get(key)?.value;
}

/** Inserts or replaces the value of `key`. */
export function writeMeta(db: Database, key: string, value: string): void {
  db.query("INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value").run(key, value);
}

export function deleteMeta(db: Database, key: string): void {
  db.query("DELETE FROM meta WHERE key = ?").run(key);
}

/** Whether the meta table exists (a database that was never migrated has none). */
export function hasMetaTable(db: Database): boolean {
  return !!db.query("SELECT 1 FROM sqlite_master WHERE type='table' AND name='meta'").get();
}
