import type { Logger } from "../ops/log";
import { logFailedRequest, logServerFault } from "../ops/server-faults";
import { ApiError, asApiError, jsonError } from "./errors";

/** Logs a full disk or the descriptor limit met by a request, and returns its answer; undefined for anything else. */
export function logServerResourceFault(log: Logger, request: Request, err: unknown): ApiError | undefined {
  const fault = logServerFault(log, request, err);
  return fault && new ApiError(503, fault.message, fault.headers);
}

/** A crash (what `answerableError` could not answer), logged the same way on every JSON-speaking surface before its 500. */
export function logCrash(log: Logger, request: Request, err: unknown) {
  logFailedRequest(log, "请求处理失败", request, err);
}

/**
 * A handler's failure as an error any JSON-speaking surface (our API, Lsky, Chevereto) can
 * answer in its own envelope, or undefined for a crash, which the caller logs and answers 500.
 * A full disk or the descriptor limit is the server's temporary condition: a retryable 503, and
 * an ERROR line.
 */
export function answerableError(log: Logger, request: Request, err: unknown): ApiError | undefined {
  return asApiError(err) ?? logServerResourceFault(log, request, err);
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
