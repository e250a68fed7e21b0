import { isDiskFull } from "../errors";
import type { Logger } from "../ops/log";
import { ApiError, asApiError, jsonError } from "./errors";
import { rawTarget } from "./raw-url";

export const DISK_FULL_MESSAGE = "服务器存储空间不足，暂时无法写入，请稍后重试或联系管理员";

export const diskFullError = () => new ApiError(503, DISK_FULL_MESSAGE, { "retry-after": "60" });

/**
 * An ERROR line for a request that failed, with its method, path and the error's message. The
 * path without parsing the URL: logging must not throw for a URL Bun built from a bad Host.
 */
function logFailedRequest(log: Logger, msg: string, request: Request, err: unknown) {
  log.error(msg, { method: request.method, path: rawTarget(request.url).path, err: err instanceof Error ? err.message : String(err) });
}

/** The operator must hear about a full disk, whichever surface met it. */
export function logDiskFull(log: Logger, request: Request, err: unknown) {
  logFailedRequest(log, "磁盘空间不足，写入失败", request, err);
}

/** A crash (what `answerableError` could not answer), logged the same way on every JSON-speaking surface before its 500. */
export function logCrash(log: Logger, request: Request, err: unknown) {
  logFailedRequest(log, "请求处理失败", request, err);
}

/**
 * A handler's failure as an error any JSON-speaking surface (our API, Lsky, Chevereto) can
 * answer in its own envelope, or undefined for a crash, which the caller logs and answers 500.
 * A full disk is the server's temporary condition: a retryable 503, and an ERROR line.
 */
export function answerableError(log: Logger, request: Request, err: unknown): ApiError | undefined {
  const known = asApiError(err);
  if (known || !isDiskFull(err)) return known;
  logDiskFull(log, request, err);
  return diskFullError();
}

/**
 * Bun.serve's `error` handler: what escaped every handler's own catch is a bug, so it is logged
 * (Bun gives no request here) before the 500. Query strings are cut from the message: an
 * error about a URL would otherwise log a presigned signature or an OAuth code.
 */
export function unhandledServerError(log: Pick<Logger, "error">): (err: Error) => Response {
  return (err) => {
    log.error("请求处理失败（未捕获的异常）", { err: `${err?.name ?? "Error"}: ${String(err?.message ?? err).replace(/\?\S*/g, "?…")}` });
    return jsonError(500, "服务器内部错误");
  };
}
