import type { Database } from "bun:sqlite";
import { Invalid } from "../../errors";
import { libraryUsage, userUsage } from "../../ops/repos/usage";
import { IMAGE_VIEW_SQL, type ImageView } from "../repo";

/**
 * The image list query (spec 2.6): newest first, filtered, paged either by `page`
 * (OFFSET, as the API has always defined it) or by an opaque `cursor` taken from the
 * previous answer's `next_cursor` (keyset: cost independent of how deep the page is).
 */
export interface ImageListFilter {
  userId?: string;
  search?: string;
  tokenId?: number;
  since?: string;
  until?: string;
  exemptOnly?: boolean;
}

export interface ImageListPage {
  rows: ImageView[];
  total: number;
  nextCursor: string | null;
}

interface Position {
  createdAt: string;
  rowid: number;
}

/** Trigram FTS needs at least 3 characters; shorter terms fall back to a LIKE scan. */
const FTS_MIN_CHARS = 3;

export function encodeCursor(p: Position): string {
  return Buffer.from(JSON.stringify([p.createdAt, p.rowid])).toString("base64url");
}

export function decodeCursor(text: string): Position {
  try {
    const [createdAt, rowid] = JSON.parse(Buffer.from(text, "base64url").toString()) as unknown[];
    if (typeof createdAt === "string" && Number.isSafeInteger(rowid)) return { createdAt, rowid: rowid as number };
  } catch {
    // falls through to the refusal
  }
  throw new Invalid("参数 cursor 无效");
}

/** An FTS5 phrase: the term in double quotes, inner quotes doubled, matches it as a substring. */
const ftsPhrase = (term: string) => `"${term.replace(/"/g, '""')}"`;

function whereClause(filter: ImageListFilter): { sql: string[]; args: (string | number)[] } {
  const sql: string[] = [];
  const args: (string | number)[] = [];
  if (filter.userId !== undefined) {
    sql.push("i.user_id = ?");
    args.push(filter.userId);
  }
  if (filter.search) {
    if ([...filter.search].length >= FTS_MIN_CHARS) {
      sql.push("i.rowid IN (SELECT rowid FROM images_fts WHERE images_fts MATCH ?)");
      args.push(ftsPhrase(filter.search));
    } else {
      sql.push("i.file_name LIKE ? ESCAPE '\\'");
      args.push(`%${filter.search.replace(/[\\%_]/g, (c) => `\\${c}`)}%`);
    }
  }
  if (filter.tokenId !== undefined) {
    sql.push("i.token_id = ?");
    args.push(filter.tokenId);
  }
  if (filter.since) {
    sql.push("i.created_at >= ?");
    args.push(filter.since);
  }
  if (filter.until) {
    sql.push("i.created_at < ?");
    args.push(filter.until);
  }
  if (filter.exemptOnly) sql.push("i.cleanup_exempt = 1");
  return { sql, args };
}

/** Without filters other than the owner, the count is the usage rollup, not a scan. */
function countImages(db: Database, filter: ImageListFilter, where: string, args: (string | number)[]): number {
  const onlyOwner = !filter.search && filter.tokenId === undefined && !filter.since && !filter.until && !filter.exemptOnly;
  if (onlyOwner) return filter.userId === undefined ? libraryUsage(db).images : userUsage(db, filter.userId).images;
  return db.query<{ n: number }, typeof args>(`SELECT COUNT(*) AS n FROM images i ${where}`).get(...args)!.n;
}

export function listImages(
  db: Database,
  filter: ImageListFilter,
  paging: { pageSize: number; offset: number; cursor?: string },
): ImageListPage {
  const { sql, args } = whereClause(filter);
  const countWhere = sql.length ? `WHERE ${sql.join(" AND ")}` : "";
  const total = countImages(db, filter, countWhere, args);
  const pageSql = [...sql];
  const pageArgs = [...args];
  if (paging.cursor !== undefined) {
    const after = decodeCursor(paging.cursor);
    // Row-value comparison walks the (created_at, rowid) index backwards from the cursor.
    pageSql.push("(i.created_at, i.rowid) < (?, ?)");
    pageArgs.push(after.createdAt, after.rowid);
  }
  const where = pageSql.length ? `WHERE ${pageSql.join(" AND ")}` : "";
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
    nextCursor: more && last ? encodeCursor({ createdAt: last.created_at, rowid: last._rowid }) : null,
  };
}

/** Rebuilds the file-name search index, which is keyed by images' rowid (a VACUUM INTO snapshot may renumber them). */
export function rebuildFileNameIndex(db: Database): void {
  db.exec("INSERT INTO images_fts (images_fts) VALUES ('rebuild')");
}
