import { ApiError } from "./errors";

/**
 * A full file system (or quota) under the data dir, whoever hit it: a temp file (ENOSPC/EDQUOT)
 * or SQLite ("database or disk is full"). It is a temporary condition of the server, not a bug
 * in the request, so it is answered as one clear 503 instead of an internal error.
 */
export function isDiskFull(err: unknown): boolean {
  if (typeof err !== "object" || err === null) return false;
  const { code, message } = err as { code?: unknown; message?: unknown };
  if (code === "ENOSPC" || code === "EDQUOT" || code === "SQLITE_FULL") return true;
  return typeof message === "string" && /database or disk is full|no space left on device|ENOSPC/i.test(message);
}

export const DISK_FULL_MESSAGE = "服务器存储空间不足，暂时无法写入，请稍后重试或联系管理员";

export const diskFullError = () => new ApiError(503, DISK_FULL_MESSAGE, { "retry-after": "60" });
