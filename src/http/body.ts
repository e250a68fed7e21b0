import type { z } from "zod";
import { SQL_TIME_PATTERN } from "../db/time";
import { badRequest, describeZodIssue } from "./errors";

/** Validates a parsed JSON body; any problem is a 400 with a Chinese message naming the field. */
export function parseBody<S extends z.ZodType>(schema: S, body: unknown): z.infer<S> {
  if (body === undefined || body === null || typeof body !== "object" || Array.isArray(body)) {
    throw badRequest("请求体必须是 JSON 对象");
  }
  const result = schema.safeParse(body);
  if (!result.success) throw badRequest(describeZodIssue(result.error.issues[0] as never));
  return result.data;
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

/** Optional query timestamp in the API's `YYYY-MM-DD HH:MM:SS` format; 400 when malformed. */
export function timestampQuery(value: string | undefined, name: string): string | undefined {
  if (value === undefined || value === "") return undefined;
  if (!SQL_TIME_PATTERN.test(value)) throw badRequest(`参数 ${name} 必须是 YYYY-MM-DD HH:MM:SS 格式`);
  return value;
}
