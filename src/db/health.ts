/** Whole-database checks for `kura check`: SQLite's own integrity and foreign-key checks, and table sizes. */
import type { Database } from "bun:sqlite";

/** The lines of PRAGMA integrity_check: exactly ["ok"] when the file is sound. */
export function integrityCheck(db: Database): string[] {
  return db
    .query<{ integrity_check: string }, []>("PRAGMA integrity_check")
    .all()
    .map((r) => r.integrity_check);
}

/** How many rows reference a missing parent. */
export function foreignKeyViolations(db: Database): number {
  return db.query("PRAGMA foreign_key_check").all().length;
}

export type CountedTable = "users" | "images" | "blobs" | "channels";

export function rowCount(db: Database, table: CountedTable): number {
  return db.query<{ n: number }, []>(`SELECT COUNT(*) AS n FROM ${table}`).get()!.n;
}
