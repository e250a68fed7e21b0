/** SQL of the dashboards (spec 2.13): reads along the indexes and rollups of migration 0007, never a sort of the library. */
import type { Database } from "bun:sqlite";
import { cleanupCounts, countListableDedup } from "../../images/repos/review";

export interface TopImageRow {
  id: string;
  file_name: string;
  access_count: number;
  size: number;
}

/**
 * The two reads behind the top images, each the first rows of one index: images ever accessed
 * from images_top / images_user_top (partial: access_count > 0, migration 0009), then, when
 * fewer than a page were accessed, never-accessed images newest first from images_created /
 * images_user. Together: every image by access count, then upload time, both descending.
 */
export function topImageSql(userId?: string): { accessed: string; unaccessed: string } {
  const columns = "SELECT i.id, i.file_name, i.access_count, b.size FROM images i";
  const ofUser = userId ? "AND i.user_id = ?" : "";
  return {
    accessed: `${columns} INDEXED BY ${userId ? "images_user_top" : "images_top"} JOIN blobs b ON b.id = i.blob_id
      WHERE i.access_count > 0 ${ofUser} ORDER BY i.access_count DESC, i.created_at DESC LIMIT ?`,
    unaccessed: `${columns} INDEXED BY ${userId ? "images_user" : "images_created"} JOIN blobs b ON b.id = i.blob_id
      WHERE i.access_count = 0 ${ofUser} ORDER BY i.created_at DESC LIMIT ?`,
  };
}

/** The most accessed images, of one user or of all (see topImageSql). */
export function topImageRows(db: Database, limit: number, userId?: string): TopImageRow[] {
  const sql = topImageSql(userId);
  const args = (n: number) => (userId ? [userId, n] : [n]);
  const accessed = db.query<TopImageRow, (string | number)[]>(sql.accessed).all(...args(limit));
  if (accessed.length >= limit) return accessed;
  // Fewer than `limit` images were ever accessed, so this scan skips fewer than `limit` rows.
  return accessed.concat(db.query<TopImageRow, (string | number)[]>(sql.unaccessed).all(...args(limit - accessed.length)));
}

export interface UserUsageRow {
  id: string;
  name: string;
  images: number;
  storage_bytes: number;
  total_accesses: number;
  traffic_estimate_bytes: number;
}

/** Images, bytes and estimated traffic of every user, from the usage rollup; biggest first. */
export function perUserUsage(db: Database): UserUsageRow[] {
  return db
    .query<UserUsageRow, []>(
      `SELECT u.id, u.name, COALESCE(uu.images, 0) AS images, COALESCE(uu.bytes, 0) AS storage_bytes,
              COALESCE(uu.accesses, 0) AS total_accesses, COALESCE(uu.traffic, 0) AS traffic_estimate_bytes
       FROM users u LEFT JOIN user_usage uu ON uu.user_id = u.id
       ORDER BY storage_bytes DESC, u.name`,
    )
    .all();
}

const count = (db: Database, sql: string) => db.query<{ n: number }, []>(sql).get()!.n;

/** The admin overview's counters: users, images awaiting cleanup review, duplicate pairs awaiting review. */
export async function reviewCounts(db: Database): Promise<{ users: number; pending_cleanup: number; pending_dedup: number }> {
  return {
    users: count(db, "SELECT COUNT(*) AS n FROM users"),
    pending_cleanup: cleanupCounts(db).listed,
    pending_dedup: await countListableDedup(db),
  };
}
