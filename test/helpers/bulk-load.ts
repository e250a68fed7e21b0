import type { Database } from "bun:sqlite";
import { rebuildFileNameIndex } from "../../src/images/repos/file-name-index";

/**
 * Loads many image rows as the scale seed does (bench/scale.ts): the file-name search triggers set aside and the
 * index rebuilt after, then ANALYZE. With room for the whole file in SQLite's page cache while it is built: at the
 * default 2 MB the inserts re-read index pages from the file all along (a 200k-image load 10.7 → 8 s). The
 * connection's own cache size is back before the test measures anything.
 */
export function bulkLoadImages(db: Database, load: () => void): void {
  const { cache_size } = db.query<{ cache_size: number }, []>("PRAGMA cache_size").get()!;
  db.exec("PRAGMA cache_size = -262144");
  try {
    const triggers = db
      .query<{ name: string; sql: string }, []>("SELECT name, sql FROM sqlite_master WHERE type = 'trigger' AND name LIKE 'images_fts%'")
      .all();
    for (const t of triggers) db.exec(`DROP TRIGGER ${t.name}`);
    db.transaction(load)();
    for (const t of triggers) db.exec(t.sql);
    rebuildFileNameIndex(db);
    db.exec("ANALYZE");
  } finally {
    db.exec(`PRAGMA cache_size = ${cache_size}`);
  }
}
