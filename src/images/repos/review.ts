/**
 * SQL of the admin review lists (spec 4.9): similar pairs awaiting a decision, and images
 * on the cleanup list. Decisions themselves (merge, dismiss) are in ../dedup.ts.
 */
import type { Database } from "bun:sqlite";
import { Slicer } from "../../db/sliced";
import { decodeCursor, encodeCursor, type Position } from "./cursor";

/**
 * FROM/WHERE of the pairs that can still be merged: both blobs live and referenced. A pair
 * whose blob lost its last reference stays pending but would have no image to show. The
 * review list and the dashboard's `pending_dedup` both count from it, so they agree.
 */
export const LISTABLE_DEDUP = `
  FROM dedup_candidates c JOIN blobs a ON a.id = c.blob_a JOIN blobs b ON b.id = c.blob_b
  WHERE c.state = 'pending' AND a.pending_delete = 0 AND b.pending_delete = 0
    AND EXISTS (SELECT 1 FROM images WHERE blob_id = c.blob_a) AND EXISTS (SELECT 1 FROM images WHERE blob_id = c.blob_b)`;

export interface Page {
  limit: number;
  offset: number;
  /** The previous answer's `next_cursor`: keyset paging, `offset` is then ignored. */
  cursor?: string;
}

/** One side of a pair: the blob and the oldest image that shows it. */
export interface SideRow {
  blob_id: number;
  image_id: string;
  mime: string;
  size: number;
  width: number;
  height: number;
  refs: number;
}

function side(db: Database, blobId: number): SideRow {
  return db
    .query<SideRow, [number]>(
      `SELECT b.id AS blob_id, (SELECT id FROM images WHERE blob_id = b.id ORDER BY created_at, rowid LIMIT 1) AS image_id,
              b.mime, b.size, b.width, b.height, b.ref_count AS refs
       FROM blobs b WHERE b.id = ?`,
    )
    .get(blobId)!;
}

/** Pending pairs counted per step: the listable test costs four lookups a pair (~6 ms a step). */
const COUNT_PAIRS = 1_000;

/**
 * How many pairs are listable, exactly, in steps of COUNT_PAIRS pending pairs (walked through
 * `dedup_pending` by id) with a turn of the loop every ~10 ms (image search's Slicer): whether
 * a pair is listable depends on its blobs' images, which no counter follows, and one COUNT over
 * 100k pending pairs held the loop 600 ms. The review list and the dashboard both count here.
 */
export async function countListableDedup(db: Database): Promise<number> {
  const edge = db.query<{ id: number }, [number, number]>("SELECT id FROM dedup_candidates WHERE state = 'pending' AND id > ? ORDER BY id LIMIT 1 OFFSET ?");
  const step = db.query<{ n: number }, [number, number]>(`SELECT COUNT(*) AS n ${LISTABLE_DEDUP} AND c.id > ? AND c.id <= ?`);
  const slicer = new Slicer();
  let total = 0;
  for (let from = 0; ; ) {
    const to = edge.get(from, COUNT_PAIRS - 1)?.id ?? Number.MAX_SAFE_INTEGER;
    total += step.get(from, to)!.n;
    if (to === Number.MAX_SAFE_INTEGER) return total;
    from = to;
    await slicer.step();
  }
}

/**
 * Where page `offset` of the dedup list starts: walks `dedup_pending_order` COUNT_PAIRS pending
 * pairs a step, counting the listable ones, until the step holding the offset, turning the
 * loop every ~10 ms. Returns the last pair before that step (undefined: from the start) and
 * the listable pairs left to skip, fewer than COUNT_PAIRS. One OFFSET statement tested every
 * skipped pair at once: 550-690 ms for a deep page of 100k pending pairs.
 */
async function seekDedup(db: Database, offset: number): Promise<{ after?: Position<number>; skip: number }> {
  const range = (after: Position<number> | undefined) => (after ? "AND (c.distance, c.id) > (?, ?)" : "");
  const argsOf = (after: Position<number> | undefined) => (after ? [after.key, after.rowid] : []);
  const slicer = new Slicer();
  let after: Position<number> | undefined;
  let skip = offset;
  while (skip >= COUNT_PAIRS) {
    const end = db
      .query<{ distance: number; id: number }, number[]>(
        `SELECT distance, id FROM dedup_candidates c WHERE state = 'pending' ${range(after)} ORDER BY distance, id LIMIT 1 OFFSET ?`,
      )
      .get(...argsOf(after), COUNT_PAIRS - 1);
    if (!end) break;
    const n = db
      .query<{ n: number }, number[]>(`SELECT COUNT(*) AS n ${LISTABLE_DEDUP} ${range(after)} AND (c.distance, c.id) <= (?, ?)`)
      .get(...argsOf(after), end.distance, end.id)!.n;
    if (n > skip) break;
    skip -= n;
    after = { key: end.distance, rowid: end.id };
    await slicer.step();
  }
  return { after, skip };
}

/**
 * Pending pairs whose both blobs still have images; closest pairs first (the likeliest true
 * duplicates). Walks `dedup_pending_order` (distance, id): a cursor starts right after the
 * previous page's last pair, a page number is found in steps (seekDedup), so a page holds the
 * loop about as long at any depth.
 */
export async function listDedupPairs(db: Database, page: Page) {
  // Counted first: a page number past the end then answers from the count alone, where the
  // seek would walk every pending pair once more (170-220 ms at 100k pairs) to find nothing.
  const total = await countListableDedup(db);
  if (page.cursor === undefined && page.offset >= total) return { items: [], total, next_cursor: null };
  const start = page.cursor === undefined ? await seekDedup(db, page.offset) : { after: decodeCursor(page.cursor, "number"), skip: 0 };
  const { after, skip } = start;
  const rows = db
    .query<{ id: number; distance: number; created_at: string; blob_a: number; blob_b: number }, number[]>(
      `SELECT c.id, c.distance, c.created_at, c.blob_a, c.blob_b ${LISTABLE_DEDUP} ${after ? "AND (c.distance, c.id) > (?, ?)" : ""}
       ORDER BY c.distance, c.id LIMIT ? OFFSET ?`,
    )
    .all(...(after ? [after.key, after.rowid] : []), page.limit + 1, skip);
  const more = rows.length > page.limit;
  if (more) rows.pop();
  const last = rows.at(-1);
  const items = rows.map((r) => ({ id: r.id, distance: r.distance, created_at: r.created_at, a: side(db, r.blob_a), b: side(db, r.blob_b) }));
  const next_cursor = more && last ? encodeCursor({ key: last.distance, rowid: last.id }) : null;
  // The page is read in one statement, so its rows and `next_cursor` agree; the count may
  // miss a decision taken between its steps and the page, as a count taken a moment earlier would.
  return { items, total, next_cursor };
}

/** How many images are on the cleanup list, and how many are exempt (migration 0011's counter). */
export function cleanupCounts(db: Database): { listed: number; exempt: number } {
  return db.query<{ listed: number; exempt: number }, []>("SELECT listed, exempt FROM cleanup_counts WHERE id = 1").get() ?? { listed: 0, exempt: 0 };
}

/** The cold age the list sorts by, as `images_cleanup_list` indexes it. */
const AGE = "COALESCE(i.last_public_access_at, i.created_at)";

/**
 * Images on the cleanup list and not exempt. Longest-unused first: never-accessed images count
 * from their upload time. Superseded images (an object_key re-pointed to a later upload) are
 * listed with reason "superseded".
 *
 * As the image list: `total` is a counter, not a count; the page's rowids come from the
 * partial index `images_cleanup_list` alone (deferred join), and only those rows are joined.
 * A cursor seeks straight to the previous page's end. A page number in the far half walks the
 * index from the other end, so the deepest page costs what the first does, and the middle
 * page half an index walk (~1M entries: tens of ms instead of seconds).
 */
export function listCleanup(db: Database, page: Page) {
  const total = cleanupCounts(db).listed;
  const where = ["i.pending_cleanup = 1", "i.cleanup_exempt = 0"];
  const args: (string | number)[] = [];
  let descending = false;
  let limit = page.limit + 1;
  let offset = page.offset;
  if (page.cursor !== undefined) {
    const after = decodeCursor(page.cursor);
    // Spelled out (not a row value) so SQLite seeks the expression index to the cursor.
    where.push(`${AGE} >= ?`, `(${AGE} > ? OR i.rowid > ?)`);
    args.push(after.key, after.key, after.rowid);
    offset = 0;
  } else if (offset >= total) {
    return { items: [], total, next_cursor: null };
  } else if (offset >= total / 2) {
    descending = true;
    const end = total - offset; // rows from this page's first row to the end of the list
    offset = Math.max(0, end - page.limit);
    limit = end - offset;
  }
  const dir = descending ? "DESC" : "";
  const rows = db
    .query<Record<string, unknown> & { _age: string; _rowid: number }, (string | number)[]>(
      `SELECT i.rowid AS _rowid, ${AGE} AS _age, i.id, '/i/' || i.id AS url, i.user_id, i.file_name, b.mime, b.size, b.width, b.height,
              i.last_public_access_at AS last_access_at, i.created_at, COALESCE(i.cleanup_reason, 'cold') AS reason
       FROM images i JOIN blobs b ON b.id = i.blob_id
       WHERE i.rowid IN (SELECT i.rowid FROM images i WHERE ${where.join(" AND ")} ORDER BY ${AGE} ${dir}, i.rowid ${dir} LIMIT ? OFFSET ?)
       ORDER BY ${AGE} ${dir}, i.rowid ${dir}`,
    )
    .all(...args, limit, offset);
  if (descending) rows.reverse();
  const more = descending ? page.offset + rows.length < total : rows.length > page.limit;
  if (rows.length > page.limit) rows.pop();
  const last = rows.at(-1);
  const items = rows.map(({ _age: _a, _rowid: _r, ...r }) => r);
  return { items, total, next_cursor: more && last ? encodeCursor({ key: last._age, rowid: last._rowid }) : null };
}
