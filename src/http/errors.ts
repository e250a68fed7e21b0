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

/** First zod issue as a short Chinese sentence naming the field. */
export function describeZodIssue(issue: { path: PropertyKey[]; code: string; keys?: string[] } | undefined): string {
  if (!issue) return "请求参数无效";
  if (issue.code === "unrecognized_keys") return `不支持的字段: ${(issue.keys ?? []).join(", ")}`;
  const field = issue.path.map(String).join(".");
  if (!field) return "请求体必须是 JSON 对象";
  if (issue.code === "invalid_type") return `字段 ${field} 缺失或类型错误`;
  return `字段 ${field} 的值无效`;
}
