import { isDiskFull, isOutOfFileDescriptors } from "../errors";
import type { Logger } from "../ops/log";
import { ApiError, asApiError, jsonError } from "./errors";
import { rawTarget } from "./raw-url";

export const DISK_FULL_MESSAGE = "服务器存储空间不足，暂时无法写入，请稍后重试或联系管理员";

export const TOO_MANY_OPEN_FILES_MESSAGE = "服务器同时打开的文件已达上限，暂时无法处理，请稍后重试";

/**
 * An ERROR line for a request that failed, with its method, path and the error's message. The
 * path without parsing the URL: logging must not throw for a URL Bun built from a bad Host.
 */
function logFailedRequest(log: Logger, msg: string, request: Request, err: unknown) {
  log.error(msg, { method: request.method, path: rawTarget(request.url).path, err: err instanceof Error ? err.message : String(err) });
}

/**
 * Temporary conditions of the server rather than faults of a request, whichever surface meets
 * them: each is answered as a retryable 503, and the operator hears what to change.
 */
const SERVER_FAULTS = [
  { is: isDiskFull, log: "磁盘空间不足，写入失败", answer: () => new ApiError(503, DISK_FULL_MESSAGE, { "retry-after": "60" }) },
  {
    is: isOutOfFileDescriptors,
    log: "打开的文件过多，请求失败：请提高进程的文件描述符上限（systemd 单元的 LimitNOFILE=）",
    answer: () => new ApiError(503, TOO_MANY_OPEN_FILES_MESSAGE, { "retry-after": "5" }),
  },
];

/** The answer to a full disk or the descriptor limit (the S3 surface words it as its own error); undefined for anything else. */
export function serverResourceError(err: unknown): ApiError | undefined {
  return SERVER_FAULTS.find((fault) => fault.is(err))?.answer();
}

/** Logs a full disk or the descriptor limit met by a request, and returns its answer; undefined for anything else. */
export function logServerResourceFault(log: Logger, request: Request, err: unknown): ApiError | undefined {
  const fault = SERVER_FAULTS.find((f) => f.is(err));
  if (!fault) return undefined;
  logFailedRequest(log, fault.log, request, err);
  return fault.answer();
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
