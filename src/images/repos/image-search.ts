import type { Database } from "bun:sqlite";
import { Slicer } from "../../db/sliced";
import { Invalid } from "../../errors";
import { IMAGE_VIEW_SQL, type ImageView } from "../repo";
import { FTS_MIN_CHARS, ftsPhrase, likeSubstring } from "./file-name-index";
import { imageConditions, type ImageQuery } from "./image-filter";
import { type ImageListPage, listImages } from "./list";

/**
 * The image list with a file-name `search` at a million images, without holding the event loop
 * (issue 10). The one-statement list (list.ts) costs what the match set costs: a term shorter than
 * FTS_MIN_CHARS is a LIKE over every name (210 ms for a rare one), and a common trigram term
 * (`IMG`: 100k matches) looks up and sorts every match for a page (290 ms) and joins every match
 * for `total` (140 ms). Here the same answer is computed in steps of a few thousand rows, with a
 * turn of the loop whenever the steps since the last one ran for SLICE_MS:
 *
 * - the page walks the (created_at, rowid) index newest first from the cursor, WALK_ROWS index
 *   entries per step, and keeps the matches after `offset` until the page is full (a common term
 *   fills it in the first step; a rare one walks on, in steps);
 * - `total` stays exact: a long term counts its FTS5 doclist in rowid order (plus the backlog),
 *   a short one counts LIKE matches over rowid ranges, COUNT_ROWS per step.
 *
 * A long term with at most SPARSE matches (most searches: a name, a date) and a long term with
 * letters outside ASCII that have case keep the one-statement list: the first costs a few ms, and
 * only FTS5 folds the case of the second (LIKE folds ASCII only, so the walk could not match it).
 */
export const SPARSE = 2_000;
const WALK_ROWS = 2_000;
const COUNT_ROWS = 10_000;
/** Above every `(created_at, rowid)`: where a walk without cursor starts. */
const TOP: [string, number] = ["9999-12-31 23:59:59", Number.MAX_SAFE_INTEGER];

/** A term LIKE matches exactly as the trigram index does: no letter outside ASCII that has case. */
export const likeMatchesAsFts = (term: string) => [...term].every((ch) => ch.charCodeAt(0) < 128 || ch.toLowerCase() === ch.toUpperCase());

/** Same format as list.ts's cursors ([created_at, rowid] as base64url JSON), so either list reads the other's. */
function readCursor(text: string): [string, number] {
  try {
    const [createdAt, rowid] = JSON.parse(Buffer.from(text, "base64url").toString()) as unknown[];
    if (typeof createdAt === "string" && Number.isSafeInteger(rowid)) return [createdAt, rowid as number];
  } catch {
    // falls through to the refusal
  }
  throw new Invalid("参数 cursor 无效");
}
const writeCursor = (createdAt: string, rowid: number) => Buffer.from(JSON.stringify([createdAt, rowid])).toString("base64url");

export async function searchImages(db: Database, filter: ImageQuery, paging: { pageSize: number; offset: number; cursor?: string }): Promise<ImageListPage> {
  const term = filter.search!;
  const long = [...term].length >= FTS_MIN_CHARS;
  if (long && (!likeMatchesAsFts(term) || ftsMatchesUpTo(db, term, SPARSE + 1) <= SPARSE)) return listImages(db, filter, paging);
  const rest = imageConditions({ ...filter, search: undefined });
  const slicer = new Slicer();
  const page = await walkPage(db, rest, likeSubstring(term), paging, slicer);
  const total = long ? await countFts(db, term, rest, slicer) : await countLike(db, term, rest, slicer);
  return { ...page, total };
}

/** How many names the FTS5 index matches, counting at most `limit` (a read of its doclist). */
export function ftsMatchesUpTo(db: Database, term: string, limit: number): number {
  return db
    .query<{ n: number }, [string, number]>("SELECT count(*) AS n FROM (SELECT rowid FROM images_fts WHERE images_fts MATCH ? LIMIT ?)")
    .get(ftsPhrase(term), limit)!.n;
}

type Conditions = ReturnType<typeof imageConditions>;
const andAll = (sql: string[]) => sql.map((c) => ` AND ${c}`).join("");

async function walkPage(
  db: Database,
  rest: Conditions,
  pattern: string,
  paging: { pageSize: number; offset: number; cursor?: string },
  slicer: Slicer,
): Promise<Omit<ImageListPage, "total">> {
  const where = `WHERE (i.created_at, i.rowid) < (?, ?)${andAll(rest.sql)}`;
  // One step: the matches among the next WALK_ROWS entries of the index, and where those entries end.
  const matches = db.query<{ r: number; c: string }, (string | number)[]>(
    `SELECT r, c FROM (SELECT i.rowid AS r, i.created_at AS c, i.file_name AS f FROM images i ${where}
       ORDER BY i.created_at DESC, i.rowid DESC LIMIT ${WALK_ROWS})
     WHERE f LIKE ? ESCAPE '\\' ORDER BY c DESC, r DESC`,
  );
  const end = db.query<{ r: number; c: string }, (string | number)[]>(
    `SELECT i.rowid AS r, i.created_at AS c FROM images i ${where} ORDER BY i.created_at DESC, i.rowid DESC LIMIT 1 OFFSET ${WALK_ROWS - 1}`,
  );
  let from = paging.cursor !== undefined ? readCursor(paging.cursor) : TOP;
  let skip = paging.cursor !== undefined ? 0 : paging.offset;
  const found: { r: number; c: string }[] = [];
  for (;;) {
    for (const m of matches.all(...from, ...rest.args, pattern)) {
      if (skip > 0) skip--;
      else found.push(m);
      if (found.length > paging.pageSize) break;
    }
    const last = end.get(...from, ...rest.args);
    if (found.length > paging.pageSize || !last) break;
    from = [last.c, last.r];
    await slicer.step();
  }
  const more = found.length > paging.pageSize;
  const rows = found.slice(0, paging.pageSize);
  const views = viewsOf(
    db,
    rows.map((m) => m.r),
  );
  const tail = rows.at(-1);
  return { rows: views, nextCursor: more && tail ? writeCursor(tail.c, tail.r) : null };
}

/** The list views of `rowids`, in their order. */
export function viewsOf(db: Database, rowids: number[]): ImageView[] {
  if (!rowids.length) return [];
  const found = db
    .query<ImageView & { _rowid: number }, [string]>(
      `${IMAGE_VIEW_SQL.replace("SELECT i.*", "SELECT i.rowid AS _rowid, i.*")} WHERE i.rowid IN (SELECT value FROM json_each(?))`,
    )
    .all(JSON.stringify(rowids));
  const byRowid = new Map(found.map(({ _rowid, ...v }) => [_rowid, v as ImageView]));
  return rowids.flatMap((r) => byRowid.get(r) ?? []);
}

/** Exact count of a long term: its FTS5 doclist in rowid order, COUNT_ROWS per step (joined when other filters apply), plus the backlog. */
async function countFts(db: Database, term: string, rest: Conditions, slicer: Slicer): Promise<number> {
  const step = db.query<{ k: number; m: number | null; n: number }, (string | number)[]>(
    rest.sql.length
      ? `SELECT count(*) AS k, max(x.r) AS m, count(i.rowid) AS n FROM (SELECT rowid AS r FROM images_fts WHERE images_fts MATCH ? AND rowid > ? ORDER BY rowid LIMIT ${COUNT_ROWS}) x
           LEFT JOIN images i ON i.rowid = x.r${andAll(rest.sql)}`
      : `SELECT count(*) AS k, max(r) AS m, count(*) AS n FROM (SELECT rowid AS r FROM images_fts WHERE images_fts MATCH ? AND rowid > ? ORDER BY rowid LIMIT ${COUNT_ROWS})`,
  );
  let total = 0;
  let after = 0;
  for (;;) {
    const { k, m, n } = step.get(ftsPhrase(term), after, ...rest.args)!;
    total += n;
    if (k < COUNT_ROWS || m === null) break;
    after = m;
    await slicer.step();
  }
  const backlog = db
    .query<{ n: number }, (string | number)[]>(
      `SELECT count(*) AS n FROM images_fts_backlog b CROSS JOIN images i ON i.rowid = b.image_rowid WHERE i.file_name LIKE ? ESCAPE '\\'${andAll(rest.sql)}`,
    )
    .get(likeSubstring(term), ...rest.args)!.n;
  return total + backlog;
}

/** Exact count of a short term: LIKE over rowid ranges of COUNT_ROWS. */
async function countLike(db: Database, term: string, rest: Conditions, slicer: Slicer): Promise<number> {
  const top = db.query<{ m: number | null }, []>("SELECT max(rowid) AS m FROM images").get()!.m ?? 0;
  const step = db.query<{ n: number }, (string | number)[]>(
    `SELECT count(*) AS n FROM images i NOT INDEXED WHERE i.rowid > ? AND i.rowid <= ? AND i.file_name LIKE ? ESCAPE '\\'${andAll(rest.sql)}`,
  );
  let total = 0;
  for (let from = 0; from < top; from += COUNT_ROWS) {
    total += step.get(from, from + COUNT_ROWS, likeSubstring(term), ...rest.args)!.n;
    await slicer.step();
  }
  return total;
}
