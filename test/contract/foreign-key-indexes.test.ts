/**
 * Every foreign key of the migrated schema has an index that starts with its columns. With
 * foreign keys on, deleting (or re-keying) a parent row looks its children up by those columns:
 * without such an index each physical blob delete read all of dedup_candidates to find the pairs
 * naming it as blob_b (migration 0014), a full scan per delete at a library's scale.
 */
import { expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { migrate, openDatabase } from "../../src/db/open";

test("every foreign key is covered by an index (or the primary key) that starts with its columns", () => {
  const dir = mkdtempSync(join(tmpdir(), "kura-fk-indexes-"));
  const db = openDatabase(join(dir, "kura.db"));
  try {
    migrate(db);
    const tables = db.query<{ name: string }, []>("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'").all();
    const uncovered: string[] = [];
    let keys = 0;
    for (const { name } of tables) {
      const indexed = db
        .query<{ name: string }, []>(`PRAGMA index_list("${name}")`)
        .all()
        .map((ix) =>
          db
            .query<{ name: string }, []>(`PRAGMA index_info("${ix.name}")`)
            .all()
            .map((c) => c.name),
        );
      const primaryKey = db
        .query<{ name: string; pk: number }, []>(`PRAGMA table_info("${name}")`)
        .all()
        .filter((c) => c.pk > 0)
        .sort((a, b) => a.pk - b.pk)
        .map((c) => c.name);
      const byId = new Map<number, { from: string; seq: number; table: string }[]>();
      for (const fk of db.query<{ id: number; seq: number; from: string; table: string }, []>(`PRAGMA foreign_key_list("${name}")`).all())
        byId.set(fk.id, [...(byId.get(fk.id) ?? []), fk]);
      for (const parts of byId.values()) {
        keys++;
        const columns = parts.sort((a, b) => a.seq - b.seq).map((p) => p.from);
        const covered = [...indexed, primaryKey].some((ix) => columns.every((c, i) => ix[i] === c));
        if (!covered) uncovered.push(`${name}(${columns.join(", ")}) -> ${parts[0]!.table}`);
      }
    }
    expect(keys).toBeGreaterThan(10);
    expect(uncovered).toEqual([]);
  } finally {
    db.close();
    rmSync(dir, { recursive: true, force: true });
  }
});
