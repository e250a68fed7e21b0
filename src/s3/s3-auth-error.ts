/**
 * The one error type of the S3 auth layer. `code` is the S3 error code clients map on
 * (the SDK turns `<Code>` into an exception class), `status` the HTTP status S3 answers with.
 * Messages are for users and never contain secrets or signatures we computed.
 */
export type S3AuthErrorCode =
  | "AccessDenied"
  | "AuthorizationHeaderMalformed"
  | "AuthorizationQueryParametersError"
  | "BadDigest"
  | "IncompleteBody"
  | "InvalidAccessKeyId"
  | "InvalidArgument"
  | "InvalidRequest"
  | "InvalidURI"
  | "MalformedTrailerError"
  | "MissingContentLength"
  | "MissingSecurityHeader"
  | "RequestTimeTooSkewed"
  | "SignatureDoesNotMatch"
  | "XAmzContentSHA256Mismatch";

const STATUS: Record<S3AuthErrorCode, number> = {
  AccessDenied: 403,
  AuthorizationHeaderMalformed: 400,
  AuthorizationQueryParametersError: 400,
  BadDigest: 400,
  IncompleteBody: 400,
  InvalidAccessKeyId: 403,
  InvalidArgument: 400,
  InvalidRequest: 400,
  InvalidURI: 400,
  MalformedTrailerError: 400,
  MissingContentLength: 411,
  MissingSecurityHeader: 400,
  RequestTimeTooSkewed: 403,
  SignatureDoesNotMatch: 403,
  XAmzContentSHA256Mismatch: 400,
};

export class S3AuthError extends Error {
  readonly code: S3AuthErrorCode;
  readonly status: number;
  constructor(code: S3AuthErrorCode, message: string) {
    super(message);
    this.name = "S3AuthError";
    this.code = code;
    this.status = STATUS[code];
  }
}
