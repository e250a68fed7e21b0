import type { Database } from "bun:sqlite";
import { inWriteTransaction } from "../../db/write-transaction";

/**
 * The file-name search index (FTS5 trigram over `images.file_name`, migrations 0007 and 0008).
 * Uploads only add their image to `images_fts_backlog`; `indexFileNameBacklog` moves the backlog
 * into FTS5 in batches, so one FTS5 segment is written per batch instead of one per upload.
 * Search reads both (`fileNameMatchSql`), so the backlog never hides an image from a search.
 */

/** Trigram FTS needs at least 3 characters; shorter terms fall back to a LIKE scan of every name. */
export const FTS_MIN_CHARS = 3;

/**
 * A search term as typed, without control characters: a NUL made the FTS5 phrase unterminated (a
 * 500) and cut the LIKE pattern short (wrong matches). Undefined when nothing is left to search for.
 */
export function searchTermOf(raw: string | null | undefined): string | undefined {
  const term = (raw ?? "").replace(/[\u0000-\u001f\u007f]/g, "");
  return term === "" ? undefined : term;
}

/** An FTS5 phrase: the term in double quotes, inner quotes doubled, matches it as a substring. */
export const ftsPhrase = (term: string) => `"${term.replace(/"/g, '""')}"`;

/** A LIKE pattern matching `term` literally anywhere (% _ and \ escaped; pair with ESCAPE '\'). */
export const likeSubstring = (term: string) => `%${term.replace(/[\\%_]/g, (c) => `\\${c}`)}%`;

/**
 * The condition "the file name of `i` contains `term`" and its arguments. Long terms use the FTS5
 * index plus a LIKE over the backlog only; ASCII letters match in either case both ways. CROSS
 * JOIN keeps the backlog the outer loop: without statistics the planner would rather scan every
 * image and probe the backlog for each (200 ms at a million images).
 */
export function fileNameMatchSql(term: string): { sql: string; args: string[] } {
  if ([...term].length < FTS_MIN_CHARS) return { sql: "i.file_name LIKE ? ESCAPE '\\'", args: [likeSubstring(term)] };
  return {
    sql: `i.rowid IN (
      SELECT rowid FROM images_fts WHERE images_fts MATCH ?
      UNION ALL
      SELECT b.image_rowid FROM images_fts_backlog b CROSS JOIN images n ON n.rowid = b.image_rowid
      WHERE n.file_name LIKE ? ESCAPE '\\')`,
    args: [ftsPhrase(term), likeSubstring(term)],
  };
}

/**
 * Indexes the oldest `limit` backlog names in one transaction and returns how many it indexed
 * (fewer than `limit` means the backlog is now empty).
 */
export function indexFileNameBacklog(db: Database, limit: number): number {
  return inWriteTransaction(db, () => {
    const last = db.query<{ image_rowid: number }, [number]>("SELECT image_rowid FROM images_fts_backlog ORDER BY image_rowid LIMIT 1 OFFSET ?").get(limit - 1);
    const through = last?.image_rowid ?? Number.MAX_SAFE_INTEGER;
    db.query(
      `INSERT INTO images_fts (rowid, file_name)
       SELECT i.rowid, i.file_name FROM images_fts_backlog b JOIN images i ON i.rowid = b.image_rowid
       WHERE b.image_rowid <= ? ORDER BY b.image_rowid`,
    ).run(through);
    return db.query("DELETE FROM images_fts_backlog WHERE image_rowid <= ?").run(through).changes;
  });
}

/** How many images wait to be indexed. */
export const fileNameBacklogSize = (db: Database): number => db.query<{ n: number }, []>("SELECT COUNT(*) AS n FROM images_fts_backlog").get()!.n;

/** Rebuilds the whole index from `images` (after a bulk load, or a snapshot that renumbered rowids) and empties the backlog. */
export function rebuildFileNameIndex(db: Database): void {
  inWriteTransaction(db, () => {
    db.exec("DELETE FROM images_fts_backlog");
    db.exec("INSERT INTO images_fts (images_fts) VALUES ('rebuild')");
  });
}
