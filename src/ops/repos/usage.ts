import type { Database } from "bun:sqlite";
import { inWriteTransaction } from "../../db/write-transaction";

/**
 * Readers of the usage rollups (migration 0007): per-user and per-channel sums kept by
 * triggers in the same transaction as every change to images and replicas, so a quota
 * check, the users list, the dashboards and /metrics read a handful of rows instead of
 * summing a million.
 */
export interface UserUsage {
  images: number;
  bytes: number;
  accesses: number;
  traffic: number;
}

export interface ChannelUsage {
  blobs: number;
  bytes: number;
  pending: number;
  failed: number;
}

const EMPTY_USER: UserUsage = { images: 0, bytes: 0, accesses: 0, traffic: 0 };

export function userUsage(db: Database, userId: string): UserUsage {
  return db.query<UserUsage, [string]>("SELECT images, bytes, accesses, traffic FROM user_usage WHERE user_id = ?").get(userId) ?? { ...EMPTY_USER };
}

/** The whole library: the sum of the per-user rows (one per user, not per image). */
export function libraryUsage(db: Database): UserUsage {
  return db
    .query<UserUsage, []>(
      `SELECT COALESCE(SUM(images), 0) AS images, COALESCE(SUM(bytes), 0) AS bytes,
              COALESCE(SUM(accesses), 0) AS accesses, COALESCE(SUM(traffic), 0) AS traffic FROM user_usage`,
    )
    .get()!;
}

export function channelUsage(db: Database): Map<number, ChannelUsage> {
  return new Map(
    db
      .query<ChannelUsage & { channel_id: number }, []>("SELECT channel_id, blobs, bytes, pending, failed FROM channel_usage")
      .all()
      .map(({ channel_id, ...u }) => [channel_id, u]),
  );
}

/**
 * Recomputes both rollups, and the cleanup counter, from the rows (the same sums migrations 0007
 * and 0011 backfill with). For bulk loaders that insert with the triggers set aside, e.g.
 * bench/scale.ts seed.
 */
export function rebuildUsageRollups(db: Database) {
  inWriteTransaction(db, () => {
    db.exec("DELETE FROM user_usage");
    db.exec("DELETE FROM channel_usage");
    db.exec(`INSERT INTO user_usage (user_id, images, bytes, accesses, traffic)
      SELECT i.user_id, COUNT(*), COALESCE(SUM(b.size), 0), COALESCE(SUM(i.access_count), 0), COALESCE(SUM(i.access_count * b.size), 0)
      FROM images i JOIN blobs b ON b.id = i.blob_id GROUP BY i.user_id`);
    db.exec(`INSERT INTO channel_usage (channel_id, blobs, bytes, pending, failed)
      SELECT bc.channel_id, COALESCE(SUM(bc.state = 'done'), 0), COALESCE(SUM(CASE WHEN bc.state = 'done' THEN b.size ELSE 0 END), 0),
             COALESCE(SUM(bc.state = 'pending'), 0), COALESCE(SUM(bc.state = 'failed'), 0)
      FROM blob_channels bc JOIN blobs b ON b.id = bc.blob_id GROUP BY bc.channel_id`);
    // The cleanup counter (migration 0011) is kept by triggers too.
    db.exec(`UPDATE cleanup_counts SET listed = (SELECT COUNT(*) FROM images WHERE pending_cleanup = 1 AND cleanup_exempt = 0),
      exempt = (SELECT COUNT(*) FROM images WHERE cleanup_exempt = 1)`);
  });
}
