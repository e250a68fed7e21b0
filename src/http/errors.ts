import { issueRequirement, type ZodIssueLike } from "../shared/zod-issue-text";
import { Conflict, DomainError, Forbidden, Invalid, NotFound, QuotaExceeded, TooMany, Unauthenticated, Unavailable, type InvalidProblem } from "../errors";

/** An error with an HTTP status and a Chinese message that is safe to show to users. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly headers: Record<string, string> = {},
  ) {
    super(message);
    this.name = "ApiError";
  }
}

export const badRequest = (msg: string) => new ApiError(400, msg);
export const unauthorized = (msg = "未登录或会话已过期") => new ApiError(401, msg);
export const forbidden = (msg: string) => new ApiError(403, msg);
export const notFound = (msg = "目标不存在") => new ApiError(404, msg);
export const conflict = (msg: string) => new ApiError(409, msg);

export function jsonError(status: number, message: string, headers: Record<string, string> = {}): Response {
  return new Response(JSON.stringify({ error: message }), {
    status,
    headers: { "content-type": "application/json; charset=utf-8", "x-content-type-options": "nosniff", ...headers },
  });
}

/** First zod issue as a short Chinese sentence naming the field and, for a bound, what would pass. */
export function describeZodIssue(issue: ZodIssueLike | undefined): string {
  if (!issue) return "请求参数无效";
  if (issue.code === "unrecognized_keys") return `不支持的字段: ${(issue.keys ?? []).join(", ")}`;
  const field = issue.path.map(String).join(".");
  // A rule over the whole body (a refine) carries its own Chinese message: "至少需要一个字段" said
  // "请求体必须是 JSON 对象" to a client that had sent `{}`.
  if (!field && issue.code === "custom" && issue.message) return issue.message;
  if (!field) return "请求体必须是 JSON 对象";
  const requirement = issueRequirement(issue);
  if (requirement) return `字段 ${field} 的值无效：${requirement}`;
  if (issue.code === "invalid_type") return `字段 ${field} 缺失或类型错误`;
  return `字段 ${field} 的值无效`;
}

const INVALID_STATUS: Record<InvalidProblem, number> = { malformed: 400, too_large: 413, unsupported_type: 415, unprocessable: 422, stalled: 408 };

/**
 * The one place where domain errors become HTTP answers for the JSON surface:
 * status, the Chinese message unchanged, and the headers each kind promises.
 */
export function httpErrorOf(err: DomainError): ApiError {
  if (err instanceof Invalid) {
    // The rest of a stalled or oversized body is never read: the connection is closed with the
    // answer rather than left open, out of step with its framing (a client still sending it would
    // hold the connection, and a graceful stop would wait for it), as nginx does after a 413.
    const unread = err.problem === "stalled" || err.problem === "too_large";
    return new ApiError(INVALID_STATUS[err.problem], err.message, unread ? { connection: "close" } : {});
  }
  if (err instanceof Unauthenticated) return new ApiError(401, err.message, challengeHeader(err.challenge));
  if (err instanceof Forbidden) return new ApiError(403, err.message, challengeHeader(err.challenge));
  if (err instanceof QuotaExceeded) return new ApiError(403, err.message);
  if (err instanceof NotFound) return new ApiError(404, err.message);
  if (err instanceof Conflict) return new ApiError(409, err.message);
  if (err instanceof TooMany) return new ApiError(429, err.message, { "retry-after": String(err.retryAfterSeconds) });
  if (err instanceof Unavailable) {
    return new ApiError(503, err.message, err.retryAfterSeconds === undefined ? {} : { "retry-after": String(err.retryAfterSeconds) });
  }
  return new ApiError(500, "服务器内部错误");
}

function challengeHeader(challenge: string | undefined): Record<string, string> {
  return challenge ? { "www-authenticate": challenge } : {};
}

/** An error the JSON-speaking surfaces can answer as is (ApiError, or a domain error mapped above); undefined for a crash. */
export function asApiError(err: unknown): ApiError | undefined {
  if (err instanceof ApiError) return err;
  if (err instanceof DomainError) return httpErrorOf(err);
  return undefined;
}
