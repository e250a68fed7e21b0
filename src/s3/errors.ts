/**
 * S3 error responses: `<Error><Code>…</Code><Message>…</Message><Resource>…</Resource><RequestId>…</RequestId></Error>`.
 * Clients map on `<Code>` (the SDK turns it into an exception class), so codes and statuses follow S3;
 * messages are Chinese and never contain secrets.
 */
import { DomainError, Forbidden, Invalid, NotFound, QuotaExceeded, TooMany, Unauthenticated, Unavailable } from "../errors";
import { ApiError } from "../http/errors";
import { serverFaultOf } from "../ops/server-faults";
import { S3AuthError } from "./s3-auth-error";
import { xmlDocument, el } from "./xml";

const STATUS: Record<string, number> = {
  AccessDenied: 403,
  BadDigest: 400,
  BucketNotEmpty: 409,
  EntityTooLarge: 400,
  IncompleteBody: 400,
  InternalError: 500,
  InvalidAccessKeyId: 403,
  InvalidArgument: 400,
  InvalidPart: 400,
  InvalidPartNumber: 416,
  InvalidPartOrder: 400,
  InvalidRange: 416,
  InvalidRequest: 400,
  InvalidStorageClass: 400,
  InvalidURI: 400,
  KeyTooLongError: 400,
  MalformedXML: 400,
  MetadataTooLarge: 400,
  MethodNotAllowed: 405,
  MissingContentLength: 411,
  NoSuchBucket: 404,
  NoSuchKey: 404,
  NotModified: 304,
  PreconditionFailed: 412,
  RequestTimeout: 400,
  NoSuchUpload: 404,
  NotImplemented: 501,
  ServiceUnavailable: 503,
  SignatureDoesNotMatch: 403,
  SlowDown: 503,
};

export class S3Error extends Error {
  readonly status: number;
  constructor(
    readonly code: string,
    message: string,
    status?: number,
    readonly headers: Record<string, string> = {},
    /** Extra elements of the error body after `<Message>`, as S3 adds them (KeyTooLongError's `<Size>`, MethodNotAllowed's `<Method>`). */
    readonly details: Record<string, string | number> = {},
  ) {
    super(message);
    this.name = "S3Error";
    this.status = status ?? STATUS[code] ?? 400;
  }
}

export const noSuchKey = () => new S3Error("NoSuchKey", "指定的对象不存在");
export const noSuchUpload = () => new S3Error("NoSuchUpload", "分片上传不存在，可能已完成或已取消");
export const notImplemented = (what: string) => new S3Error("NotImplemented", `Kura 的 S3 接口不支持该操作：${what}`);
export const malformedXml = () => new S3Error("MalformedXML", "XML 请求体格式错误");
/** The rest of the body is never read, so the connection closes with the answer (see http/errors.ts). */
export const entityTooLarge = (maxBytes: number) =>
  new S3Error("EntityTooLarge", `图片超过大小上限（${Math.floor(maxBytes / 1048576)} MB）`, 400, { connection: "close" });

/** Any error thrown while serving a request, as an S3 error (Kura ApiErrors keep their Chinese message). */
export function toS3Error(err: unknown): S3Error {
  if (err instanceof S3Error) return err;
  if (err instanceof S3AuthError) return new S3Error(err.code, err.message, err.status);
  if (err instanceof DomainError) return s3ErrorOf(err);
  if (err instanceof ApiError) {
    const headers = err.headers;
    switch (err.status) {
      case 400:
        return new S3Error("InvalidArgument", err.message);
      case 403:
        return new S3Error("AccessDenied", err.message);
      case 404:
        return new S3Error("NoSuchKey", err.message);
      case 413:
        return new S3Error("EntityTooLarge", err.message);
      case 415:
      case 422:
        return new S3Error("InvalidArgument", err.message);
      case 429:
        return new S3Error("SlowDown", err.message, 503, headers);
      case 503:
        return new S3Error("ServiceUnavailable", err.message, 503, headers);
      default:
        return new S3Error(err.status >= 500 ? "InternalError" : "InvalidRequest", err.message, err.status >= 500 ? 500 : 400);
    }
  }
  const fault = serverFaultOf(err);
  if (fault) return new S3Error("ServiceUnavailable", fault.message, 503, fault.headers);
  return new S3Error("InternalError", "服务器内部错误");
}

/**
 * The one place where domain errors become S3 errors: codes clients map on, 4xx the
 * caller can fix, 503 SlowDown / ServiceUnavailable (with Retry-After) worth retrying.
 */
function s3ErrorOf(err: DomainError): S3Error {
  if (err instanceof Invalid) {
    // S3's answer to a body that stopped arriving; the rest is never read, so the connection goes.
    if (err.problem === "stalled") return new S3Error("RequestTimeout", err.message, 400, { connection: "close" });
    if (err.problem === "too_large") return new S3Error("EntityTooLarge", err.message, 400, { connection: "close" });
    return new S3Error("InvalidArgument", err.message);
  }
  if (err instanceof Unauthenticated || err instanceof Forbidden || err instanceof QuotaExceeded) return new S3Error("AccessDenied", err.message);
  if (err instanceof NotFound) return new S3Error("NoSuchKey", err.message);
  if (err instanceof TooMany) return new S3Error("SlowDown", err.message, 503, { "retry-after": String(err.retryAfterSeconds) });
  if (err instanceof Unavailable) {
    return new S3Error("ServiceUnavailable", err.message, 503, err.retryAfterSeconds === undefined ? {} : { "retry-after": String(err.retryAfterSeconds) });
  }
  // Conflict: S3 has no general code for it; the message says what to do.
  return new S3Error("InvalidRequest", err.message);
}

/** The XML error response; HEAD answers carry no body, as S3's do. */
export function errorResponse(err: S3Error, opts: { method: string; resource: string; requestId: string }): Response {
  const headers = { "content-type": "application/xml", "x-amz-request-id": opts.requestId, ...err.headers };
  if (opts.method === "HEAD") return new Response(null, { status: err.status, headers });
  const details = Object.entries(err.details).map(([name, value]) => el(name, value));
  const body = xmlDocument(
    el("Error", [el("Code", err.code), el("Message", err.message), ...details, el("Resource", opts.resource), el("RequestId", opts.requestId)]),
  );
  return new Response(body, { status: err.status, headers });
}
