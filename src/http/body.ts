import type { z } from "zod";
import { parseSqlTime, SQL_TIME_PATTERN, sqlTime } from "../db/time";
import { badRequest, describeZodIssue } from "./errors";

/**
 * Validates a parsed JSON body; any problem is a 400 with a Chinese message naming the field.
 * Text that is not well-formed UTF-16 (a lone surrogate, `"a\ud800b"`) is refused before the
 * schema: SQLite stores it as U+FFFD, so the answer echoing the input and what is stored (and
 * compared for uniqueness) would differ.
 */
export function parseBody<S extends z.ZodType>(schema: S, body: unknown): z.infer<S> {
  if (body === undefined || body === null || typeof body !== "object" || Array.isArray(body)) {
    throw badRequest("请求体必须是 JSON 对象");
  }
  requireWellFormedText(body);
  const result = schema.safeParse(body);
  if (!result.success) throw badRequest(describeZodIssue(result.error.issues[0] as never));
  return result.data;
}

/** 400 when any string of a parsed JSON body (a value or a key, at any depth) holds a lone surrogate. */
export function requireWellFormedText(body: unknown): void {
  const field = illFormedField(body);
  if (field !== undefined) throw badRequest(`字段 ${field} 含有无效的 Unicode 字符（不成对的代理项）`);
}

/**
 * The top-level field under which a string that is not well-formed UTF-16 sits, "" when it is
 * the body itself, or undefined when every string is well-formed. Iterative: a deeply nested
 * body must not overflow the stack.
 */
export function illFormedField(body: unknown): string | undefined {
  const pending: [unknown, string][] = [[body, ""]];
  for (let next = pending.pop(); next; next = pending.pop()) {
    const [value, field] = next;
    if (typeof value === "string") {
      if (!value.isWellFormed()) return field;
    } else if (Array.isArray(value)) {
      for (const item of value) pending.push([item, field]);
    } else if (value !== null && typeof value === "object") {
      for (const [key, item] of Object.entries(value)) {
        // Named as it will be shown: the message itself must be well-formed.
        if (!key.isWellFormed()) return field || key.toWellFormed();
        pending.push([item, field || key]);
      }
    }
  }
  return undefined;
}

/** Query integer within bounds, or the default when absent; 400 when malformed. */
export function queryInt(value: string | undefined, name: string, def: number, min: number, max = Number.MAX_SAFE_INTEGER): number {
  if (value === undefined || value === "") return def;
  if (!/^-?\d+$/.test(value)) throw badRequest(`参数 ${name} 必须是整数`);
  const n = Number(value);
  if (n < min) throw badRequest(`参数 ${name} 不能小于 ${min}`);
  return Math.min(n, max);
}

/** Spec section 8: page from 1 (default 1), page_size default 20, larger than 100 is treated as 100. */
export function pagination(query: Record<string, string | undefined>): { page: number; pageSize: number; offset: number } {
  const page = queryInt(query.page, "page", 1, 1);
  const pageSize = queryInt(query.page_size, "page_size", 20, 1, 100);
  return { page, pageSize, offset: (page - 1) * pageSize };
}

/** Path parameter that must be a positive int64 id; 404 otherwise (nothing can have that id). */
export function idParam(value: string | undefined): number | undefined {
  if (!value || !/^\d{1,18}$/.test(value)) return undefined;
  return Number(value);
}

/**
 * A UTC time in the API's `YYYY-MM-DD HH:MM:SS` format that exists: the shape, and a date and
 * time of day that name a real instant (no month 13, no 30 February, no 24:00:00 or leap
 * second 23:59:60). Compared as text with the database's own timestamps, an impossible value
 * would silently filter everything or nothing.
 */
export function isSqlTime(value: string): boolean {
  if (!SQL_TIME_PATTERN.test(value)) return false;
  const at = parseSqlTime(value).getTime();
  return Number.isFinite(at) && sqlTime(at) === value;
}

/** Optional query timestamp in the API's `YYYY-MM-DD HH:MM:SS` format (UTC); 400 when malformed or impossible. */
export function timestampQuery(value: string | undefined, name: string): string | undefined {
  if (value === undefined || value === "") return undefined;
  if (!isSqlTime(value)) throw badRequest(`参数 ${name} 必须是有效的 UTC 时间，格式 YYYY-MM-DD HH:MM:SS`);
  return value;
}
