import type { Database } from "bun:sqlite";

/**
 * Readers of the usage rollups (migration 0006): per-user and per-channel sums kept by
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
  failed: number;
}

const EMPTY_USER: UserUsage = { images: 0, bytes: 0, accesses: 0, traffic: 0 };

export function userUsage(db: Database, userId: string): UserUsage {
  return (
    db.query<UserUsage, [string]>("SELECT images, bytes, accesses, traffic FROM user_usage WHERE user_id = ?").get(userId) ?? { ...EMPTY_USER }
  );
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
      .query<ChannelUsage & { channel_id: number }, []>("SELECT channel_id, blobs, bytes, failed FROM channel_usage")
      .all()
      .map(({ channel_id, ...u }) => [channel_id, u]),
  );
}
