import type { Database } from "bun:sqlite";
import { libraryUsage, userUsage } from "../../ops/repos/usage";
import { fileNameMatchSql } from "./file-name-index";
import { cleanupCounts } from "./review";

/**
 * The filters of every image list (the console/API list, the Lsky Pro list): one definition,
 * turned into SQL over `images i` here, so each list searches and counts the same way.
 */
export interface ImageQuery {
  userId?: string;
  /** Substring of the file name (matched literally: % and _ are not wildcards). */
  search?: string;
  tokenId?: number;
  /** SQL timestamps: created at or after `since`, strictly before `until`. */
  since?: string;
  until?: string;
  /** Only images exempt from cleanup. */
  exempt?: boolean;
}

/** The conditions (joined with AND by the caller) and their arguments. */
export function imageConditions(q: ImageQuery): { sql: string[]; args: (string | number)[] } {
  const sql: string[] = [];
  const args: (string | number)[] = [];
  if (q.userId !== undefined) {
    // With a token, its (token_id, created_at) index (migration 0013) serves the list: the unary +
    // keeps the planner off the owner's index, which it would walk whole for a token's few rows.
    sql.push(q.tokenId !== undefined ? "+i.user_id = ?" : "i.user_id = ?");
    args.push(q.userId);
  }
  if (q.search) {
    const match = fileNameMatchSql(q.search);
    sql.push(match.sql);
    args.push(...match.args);
  }
  if (q.tokenId !== undefined) {
    sql.push("i.token_id = ?");
    args.push(q.tokenId);
  }
  if (q.since) {
    sql.push("i.created_at >= ?");
    args.push(q.since);
  }
  if (q.until) {
    sql.push("i.created_at < ?");
    args.push(q.until);
  }
  if (q.exempt) sql.push("i.cleanup_exempt = 1");
  return { sql, args };
}

export const whereOf = (sql: string[]) => (sql.length ? `WHERE ${sql.join(" AND ")}` : "");

/**
 * How many images match; without filters other than the owner (and "exempt only"), a rollup or
 * counter answers, not a scan. `conditions` are the query's own `imageConditions`, which the caller builds for its page anyway.
 */
export function countImages(db: Database, q: ImageQuery, conditions: ReturnType<typeof imageConditions>): number {
  const noOtherFilter = !q.search && q.tokenId === undefined && !q.since && !q.until;
  if (noOtherFilter && !q.exempt) return q.userId === undefined ? libraryUsage(db).images : userUsage(db, q.userId).images;
  // Everyone's exempt images: the counter of migration 0011 (with an owner, their partial index).
  if (noOtherFilter && q.userId === undefined) return cleanupCounts(db).exempt;
  if (!q.search && q.tokenId === undefined && !q.exempt) {
    const byComplement = dateRangeCount(db, q);
    if (byComplement !== undefined) return byComplement;
  }
  const { sql, args } = conditions;
  return db.query<{ n: number }, typeof args>(`SELECT COUNT(*) AS n FROM images i ${whereOf(sql)}`).get(...args)!.n;
}

/**
 * A date range (with or without an owner) counted as the rollup minus the rows outside it, when
 * those are at most half: a range covering (nearly) everything no longer counts a million index
 * entries (75 ms, audit 10 LOW); undefined when the range holds the fewer rows, which the caller
 * counts directly. Either way at most about half of the index is read.
 */
function dateRangeCount(db: Database, q: ImageQuery): number | undefined {
  if (q.since && q.until && q.since >= q.until) return 0; // empty (would fall back to a cheap direct count anyway)
  const all = q.userId === undefined ? libraryUsage(db).images : userUsage(db, q.userId).images;
  const owner = q.userId === undefined ? "" : "i.user_id = ? AND ";
  const ownerArgs = q.userId === undefined ? [] : [q.userId];
  const half = Math.floor(all / 2) + 1;
  const upTo = (cond: string, value: string, limit: number) =>
    db
      .query<{ n: number }, (string | number)[]>(`SELECT count(*) AS n FROM (SELECT 1 FROM images i WHERE ${owner}${cond} LIMIT ?)`)
      .get(...ownerArgs, value, limit)!.n;
  let outside = 0;
  if (q.since) outside += upTo("i.created_at < ?", q.since, half);
  if (q.until && outside < half) outside += upTo("i.created_at >= ?", q.until, half - outside);
  return outside < half ? all - outside : undefined;
}
