/** SQL of the settings table: one row per changed key, values as JSON (secrets sealed by the caller). */
import type { Database } from "bun:sqlite";
import { inWriteTransaction } from "../db/write-transaction";

export function readSettingRows(db: Database): { key: string; value: string }[] {
  return db.query<{ key: string; value: string }, []>("SELECT key, value FROM settings").all();
}

/** Upserts the given encoded values in one transaction. */
export function writeSettingRows(db: Database, rows: readonly [key: string, value: string][]): void {
  const upsert = db.query("INSERT INTO settings (key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value");
  inWriteTransaction(db, () => {
    for (const [key, value] of rows) upsert.run(key, value);
  });
}
