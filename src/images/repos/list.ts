import type { Database } from "bun:sqlite";
import { decodeCursor, encodeCursor } from "./cursor";
import { IMAGE_VIEW_SQL, type ImageView } from "../repo";
import { countImages, imageConditions, whereOf, type ImageQuery } from "./image-filter";

/**
 * The image list query (spec 2.6): newest first, filtered, paged either by `page`
 * (OFFSET, as the API has always defined it) or by an opaque `cursor` taken from the
 * previous answer's `next_cursor` (keyset: cost independent of how deep the page is).
 */
export interface ImageListPage {
  rows: ImageView[];
  total: number;
  nextCursor: string | null;
}

/**
 * Where a keyset page ends: the sort key of its last row (upload time here; the review lists
 * use the cold age or the pair distance) and its rowid as the tie-break.
 */
export function listImages(db: Database, filter: ImageQuery, paging: { pageSize: number; offset: number; cursor?: string }): ImageListPage {
  const conditions = imageConditions(filter);
  const { sql, args } = conditions;
  const total = countImages(db, filter, conditions);
  // A page number past the end: nothing to skip to (OFFSET would walk every match first).
  if (paging.cursor === undefined && paging.offset >= total) return { rows: [], total, nextCursor: null };
  const pageSql = [...sql];
  const pageArgs = [...args];
  if (paging.cursor !== undefined) {
    const after = decodeCursor(paging.cursor);
    // Row-value comparison walks the (created_at, rowid) index backwards from the cursor.
    pageSql.push("(i.created_at, i.rowid) < (?, ?)");
    pageArgs.push(after.key, after.rowid);
  }
  const where = whereOf(pageSql);
  const offset = paging.cursor !== undefined ? 0 : paging.offset;
  // Deferred join: the page's rowids come from the (created_at, rowid) index alone, so rows
  // skipped by OFFSET cost an index step each, not a join with blobs and tokens.
  const rows = db
    .query<ImageView & { _rowid: number }, (string | number)[]>(
      `${IMAGE_VIEW_SQL.replace("SELECT i.*", "SELECT i.rowid AS _rowid, i.*")}
       WHERE i.rowid IN (SELECT i.rowid FROM images i ${where} ORDER BY i.created_at DESC, i.rowid DESC LIMIT ? OFFSET ?)
       ORDER BY i.created_at DESC, i.rowid DESC`,
    )
    .all(...pageArgs, paging.pageSize + 1, offset);
  const more = rows.length > paging.pageSize;
  if (more) rows.pop();
  const last = rows.at(-1);
  return {
    rows: rows.map(({ _rowid: _, ...r }) => r as ImageView),
    total,
    nextCursor: more && last ? encodeCursor({ key: last.created_at, rowid: last._rowid }) : null,
  };
}
