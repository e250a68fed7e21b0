/**
 * AWS Signature Version 4 verification for the `/s3/` surface (header auth and presigned query auth).
 * Pure: no HTTP, no database. The caller supplies the secret lookup and, for tests, the clock.
 * What real clients send is documented in shared/s3/README.md; every captured request verifies here.
 */
import { createHash } from "node:crypto";
import { DOT_SEGMENT_HINT, DOT_SEGMENT_KEY_MESSAGE } from "./dot-segments";
import { S3AuthError } from "./s3-auth-error";
import {
  ALGORITHM,
  canonicalHeaders,
  canonicalQuery,
  canonicalRequest,
  canonicalUriCandidates,
  deriveSigningKey,
  formatAmzDate,
  groupHeaders,
  parseAmzDate,
  parseQuery,
  signaturesEqual,
  signHex,
  stringToSign,
} from "./sigv4-canonical";

export { S3AuthError } from "./s3-auth-error";

export const MAX_CLOCK_SKEW_MS = 15 * 60 * 1000;
export const MAX_PRESIGNED_EXPIRES_S = 7 * 24 * 3600;

export type PayloadMode =
  | "sha256"
  | "UNSIGNED-PAYLOAD"
  | "STREAMING-UNSIGNED-PAYLOAD-TRAILER"
  | "STREAMING-AWS4-HMAC-SHA256-PAYLOAD"
  | "STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER";

const NAMED_MODES = new Set<string>([
  "UNSIGNED-PAYLOAD",
  "STREAMING-UNSIGNED-PAYLOAD-TRAILER",
  "STREAMING-AWS4-HMAC-SHA256-PAYLOAD",
  "STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER",
]);

export interface SigV4Request {
  method: string;
  /** Raw request target as received: `/path?query` or an absolute URL (Bun's `req.url`). Never decoded. */
  url: string;
  /** `req.headers` or `[name, value]` pairs in wire order (duplicates allowed). */
  headers: Iterable<readonly [string, string]>;
  /** The complete body when already in memory; enables the hex `x-amz-content-sha256` check. */
  body?: Uint8Array;
}

export interface VerifyOptions {
  /** accessKeyId → secret, or undefined for an unknown key (→ InvalidAccessKeyId). */
  lookupSecret: (accessKeyId: string) => string | undefined;
  /** Injectable clock (epoch ms or Date); defaults to Date.now(). */
  now?: number | Date;
  /**
   * Where the surface is mounted (`/s3`). A signature computed over the path without it is accepted
   * too: clients that cannot put a path in their endpoint (s3cmd, minio-go) reach the surface through
   * a proxy that maps a host's root onto the mount, and they sign the path they sent.
   */
  mountPrefix?: string;
  /**
   * Paths the client may have signed that the HTTP server resolved to the one received (dot segments,
   * dot-segments.ts). Tried only after the signature failed: a match is 400 InvalidArgument saying
   * so, never a success, and without one the mismatch message names dot segments as a likely cause.
   */
  resolvedOrigins?: (path: string) => string[];
}

export interface SigV4Auth {
  auth: "header" | "presigned";
  accessKeyId: string;
  region: string;
  service: string;
  signedHeaders: string[];
  payloadMode: PayloadMode;
  /** The payload hash line of the canonical request (hex digest or mode name). */
  payloadHash: string;
  /** The request signature; chunk signatures of aws-chunked bodies chain from it. */
  seedSignature: string;
  signingKey: Buffer;
  /** `<date>/<region>/<service>/aws4_request` */
  scope: string;
  amzDate: string;
  canonicalRequest: string;
  stringToSign: string;
  /** Presigned only: epoch ms after which the URL is refused. */
  expiresAt?: number;
  /** `x-amz-decoded-content-length` for streaming modes. */
  decodedContentLength?: number;
}

interface ParsedAuth {
  auth: "header" | "presigned";
  accessKeyId: string;
  date: string;
  region: string;
  service: string;
  signedHeaders: string[];
  signature: string;
  amzDate: string;
  expiresS?: number;
}

/** Split a request target into raw path and raw query without decoding anything. */
function splitTarget(url: string): { path: string; query: string } {
  let target = url;
  const scheme = /^[a-zA-Z][a-zA-Z0-9+.-]*:\/\/[^/?#]*/.exec(target);
  if (scheme) target = target.slice(scheme[0].length) || "/";
  const hash = target.indexOf("#");
  if (hash >= 0) target = target.slice(0, hash);
  const q = target.indexOf("?");
  return q < 0 ? { path: target, query: "" } : { path: target.slice(0, q), query: target.slice(q + 1) };
}

function parseCredential(value: string, code: "AuthorizationHeaderMalformed" | "AuthorizationQueryParametersError") {
  const parts = value.split("/");
  if (parts.length < 5 || parts.at(-1) !== "aws4_request") throw new S3AuthError(code, "签名凭据格式错误，应为 <AccessKeyId>/<日期>/<区域>/s3/aws4_request");
  const [date, region, service] = parts.slice(-4, -1) as [string, string, string];
  const accessKeyId = parts.slice(0, -4).join("/");
  if (!accessKeyId || !/^\d{8}$/.test(date) || !region) throw new S3AuthError(code, "签名凭据格式错误");
  if (service !== "s3") throw new S3AuthError(code, `签名凭据中的服务名应为 s3，而不是 ${service}`);
  return { accessKeyId, date, region, service };
}

function parseSignedHeaders(value: string, code: "AuthorizationHeaderMalformed" | "AuthorizationQueryParametersError"): string[] {
  const list = value.split(";").map((h) => h.trim().toLowerCase());
  if (list.some((h) => h === "")) throw new S3AuthError(code, "SignedHeaders 格式错误");
  if (!list.includes("host")) throw new S3AuthError(code, "SignedHeaders 必须包含 host");
  return list;
}

/** S3's own answer to V2 signatures in V4-only regions is 400 InvalidRequest. */
const signatureV2 = () =>
  new S3AuthError("InvalidRequest", "只支持 AWS Signature V4（AWS4-HMAC-SHA256），不支持 Signature V2：请在客户端设置 signature_version = s3v4");

/** `AWS4-HMAC-SHA256 Credential=…, SignedHeaders=…, Signature=…` (rclone/SDK use ", ", minio-go ","). */
function parseAuthorizationHeader(value: string, headers: Map<string, string[]>): ParsedAuth {
  const code = "AuthorizationHeaderMalformed";
  const trimmed = value.trim();
  if (/^AWS [^\s:]+:/.test(trimmed)) throw signatureV2();
  if (!trimmed.startsWith(`${ALGORITHM} `)) throw new S3AuthError(code, `仅支持 ${ALGORITHM} 签名（AWS Signature Version 4）`);
  const fields = new Map<string, string>();
  for (const item of trimmed.slice(ALGORITHM.length).split(",")) {
    const eq = item.indexOf("=");
    if (eq < 0) throw new S3AuthError(code, "Authorization 头格式错误");
    fields.set(item.slice(0, eq).trim(), item.slice(eq + 1).trim());
  }
  const credential = fields.get("Credential");
  const signed = fields.get("SignedHeaders");
  const signature = fields.get("Signature");
  if (!credential || !signed || !signature) throw new S3AuthError(code, "Authorization 头缺少 Credential、SignedHeaders 或 Signature");
  const cred = parseCredential(credential, code);
  const amzDate = headerAmzDate(headers);
  if (amzDate.slice(0, 8) !== cred.date) throw new S3AuthError(code, "签名凭据中的日期与 X-Amz-Date 不一致");
  return { auth: "header", ...cred, signedHeaders: parseSignedHeaders(signed, code), signature, amzDate };
}

/** x-amz-date, or the Date header (SigV4 allows either for header auth). */
function headerAmzDate(headers: Map<string, string[]>): string {
  const amz = headers.get("x-amz-date")?.[0]?.trim();
  if (amz !== undefined) {
    if (parseAmzDate(amz) === undefined) throw new S3AuthError("AccessDenied", "X-Amz-Date 格式无效");
    return amz;
  }
  const date = headers.get("date")?.[0];
  const ms = date === undefined ? NaN : Date.parse(date);
  if (Number.isNaN(ms)) throw new S3AuthError("AccessDenied", "请求缺少有效的 X-Amz-Date 或 Date 头");
  return formatAmzDate(ms);
}

function parsePresigned(query: [string, string][]): ParsedAuth {
  const code = "AuthorizationQueryParametersError";
  const get = (k: string) => query.find(([key]) => key === k)?.[1];
  const algorithm = get("X-Amz-Algorithm");
  if (algorithm !== ALGORITHM) throw new S3AuthError(code, `X-Amz-Algorithm 必须为 ${ALGORITHM}`);
  const credential = get("X-Amz-Credential");
  const amzDate = get("X-Amz-Date");
  const expires = get("X-Amz-Expires");
  const signed = get("X-Amz-SignedHeaders");
  const signature = get("X-Amz-Signature");
  if (!credential || !amzDate || !expires || !signed || !signature) {
    throw new S3AuthError(code, "预签名链接缺少 X-Amz-Credential、X-Amz-Date、X-Amz-Expires、X-Amz-SignedHeaders 或 X-Amz-Signature");
  }
  const cred = parseCredential(credential, code);
  if (parseAmzDate(amzDate) === undefined) throw new S3AuthError(code, "X-Amz-Date 格式无效");
  if (amzDate.slice(0, 8) !== cred.date) throw new S3AuthError(code, "签名凭据中的日期与 X-Amz-Date 不一致");
  if (!/^\d{1,7}$/.test(expires) || Number(expires) < 1 || Number(expires) > MAX_PRESIGNED_EXPIRES_S) {
    throw new S3AuthError(code, `X-Amz-Expires 必须在 1 到 ${MAX_PRESIGNED_EXPIRES_S} 秒之间`);
  }
  return { auth: "presigned", ...cred, signedHeaders: parseSignedHeaders(signed, code), signature, amzDate, expiresS: Number(expires) };
}

function payloadModeOf(value: string): PayloadMode {
  if (/^[0-9a-fA-F]{64}$/.test(value)) return "sha256";
  if (NAMED_MODES.has(value)) return value as PayloadMode;
  throw new S3AuthError("InvalidArgument", "x-amz-content-sha256 的值无效或不受支持");
}

function checkClock(parsed: ParsedAuth, nowMs: number): number | undefined {
  const dated = parseAmzDate(parsed.amzDate) as number;
  if (parsed.auth === "header") {
    if (Math.abs(nowMs - dated) > MAX_CLOCK_SKEW_MS) throw new S3AuthError("RequestTimeTooSkewed", "请求时间与服务器时间相差超过 15 分钟，请校准客户端时钟");
    return undefined;
  }
  if (dated - nowMs > MAX_CLOCK_SKEW_MS) throw new S3AuthError("AccessDenied", "预签名链接尚未生效（签名时间晚于服务器时间）");
  const expiresAt = dated + (parsed.expiresS as number) * 1000;
  if (nowMs > expiresAt) throw new S3AuthError("AccessDenied", "预签名链接已过期");
  return expiresAt;
}

/**
 * Verify a SigV4-signed request. Returns what later stages need (signing key and seed signature for
 * aws-chunked bodies, payload mode) or throws S3AuthError. Anonymous requests are AccessDenied.
 */
export function verifySigV4(req: SigV4Request, opts: VerifyOptions): SigV4Auth {
  const { path, query } = splitTarget(req.url);
  const headers = groupHeaders(req.headers);
  const pairs = parseQuery(query);
  const authHeader = headers.get("authorization");
  const presigned = pairs.some(([k]) => k === "X-Amz-Algorithm");
  if (authHeader && presigned) throw new S3AuthError("InvalidArgument", "只能使用一种认证方式：Authorization 头或预签名查询参数");
  if (!authHeader && !presigned) {
    // awscli v1 `s3 presign` and old SDKs sign with V2: say so instead of calling the request unsigned.
    if (pairs.some(([k]) => k === "AWSAccessKeyId") && pairs.some(([k]) => k === "Signature")) throw signatureV2();
    throw new S3AuthError("AccessDenied", "请求未签名，拒绝匿名访问");
  }
  if (authHeader && authHeader.length > 1) throw new S3AuthError("AuthorizationHeaderMalformed", "Authorization 头出现了多次");
  const parsed = authHeader ? parseAuthorizationHeader(authHeader[0] as string, headers) : parsePresigned(pairs);

  // Every x-amz-* header present must be signed, as S3 demands; otherwise e.g. a holder of a presigned
  // PUT could add x-amz-copy-source and turn it into a copy of any other object.
  for (const name of headers.keys()) {
    if (name.startsWith("x-amz-") && !parsed.signedHeaders.includes(name)) {
      throw new S3AuthError("AccessDenied", `请求中存在未签名的头：${name}`);
    }
  }

  const contentSha = headers.get("x-amz-content-sha256")?.[0]?.trim();
  let payloadHash: string;
  if (parsed.auth === "presigned") {
    payloadHash = pairs.find(([k]) => k === "X-Amz-Content-Sha256")?.[1] ?? contentSha ?? "UNSIGNED-PAYLOAD";
  } else {
    if (contentSha === undefined) throw new S3AuthError("MissingSecurityHeader", "请求缺少 x-amz-content-sha256 头");
    payloadHash = contentSha;
  }
  const payloadMode = payloadModeOf(payloadHash);

  let decodedContentLength: number | undefined;
  if (payloadMode.startsWith("STREAMING-")) {
    const raw = headers.get("x-amz-decoded-content-length")?.[0]?.trim();
    if (raw === undefined || !/^\d{1,15}$/.test(raw)) throw new S3AuthError("MissingContentLength", "分块上传缺少有效的 x-amz-decoded-content-length 头");
    decodedContentLength = Number(raw);
  }

  const secret = opts.lookupSecret(parsed.accessKeyId);
  if (secret === undefined) throw new S3AuthError("InvalidAccessKeyId", "访问密钥 ID 不存在或已被撤销");
  const nowMs = opts.now === undefined ? Date.now() : Number(opts.now);
  const expiresAt = checkClock(parsed, nowMs);

  const scope = `${parsed.date}/${parsed.region}/${parsed.service}/aws4_request`;
  const signingKey = deriveSigningKey(secret, parsed.date, parsed.region, parsed.service);
  const cQuery = canonicalQuery(pairs, parsed.auth === "presigned" ? "X-Amz-Signature" : undefined);
  const cHeaders = canonicalHeaders(parsed.signedHeaders, headers);
  const signedWith = (paths: string[]): { canonicalRequest: string; stringToSign: string } | undefined => {
    for (const canonicalUri of paths.flatMap((p) => uriCandidates(p, opts.mountPrefix))) {
      const creq = canonicalRequest({
        method: req.method,
        canonicalUri,
        canonicalQuery: cQuery,
        canonicalHeaders: cHeaders,
        signedHeaders: parsed.signedHeaders,
        payloadHash,
      });
      const sts = stringToSign(parsed.amzDate, scope, creq);
      if (signaturesEqual(signHex(signingKey, sts), parsed.signature)) return { canonicalRequest: creq, stringToSign: sts };
    }
    return undefined;
  };
  const match = signedWith([path]);
  if (!match) throw mismatch(opts, !!opts.resolvedOrigins && signedWith(opts.resolvedOrigins(path)) !== undefined);

  if (payloadMode === "sha256" && req.body !== undefined) assertPayloadSha256(payloadHash, req.body);

  return {
    auth: parsed.auth,
    accessKeyId: parsed.accessKeyId,
    region: parsed.region,
    service: parsed.service,
    signedHeaders: parsed.signedHeaders,
    payloadMode,
    payloadHash,
    seedSignature: parsed.signature.toLowerCase(),
    signingKey,
    scope,
    amzDate: parsed.amzDate,
    canonicalRequest: match.canonicalRequest,
    stringToSign: match.stringToSign,
    expiresAt,
    decodedContentLength,
  };
}

/**
 * Canonical URI candidates of a received path: as sent, and without the mount (`mountPrefix`) for
 * clients behind a proxy that maps a host's root onto it.
 */
function uriCandidates(path: string, mount: string | undefined): string[] {
  const unmounted = mount && (path === mount || path.startsWith(`${mount}/`)) ? path.slice(mount.length) || "/" : undefined;
  return [...canonicalUriCandidates(path), ...(unmounted ? canonicalUriCandidates(unmounted) : [])];
}

/** The refusal of a signature that did not verify: InvalidArgument when it verified for a path with dot segments (`dotted`). */
function mismatch(opts: VerifyOptions, dotted: boolean): S3AuthError {
  if (dotted) return new S3AuthError("InvalidArgument", DOT_SEGMENT_KEY_MESSAGE);
  return new S3AuthError("SignatureDoesNotMatch", `签名不匹配，请检查访问密钥和签名方式${opts.resolvedOrigins ? DOT_SEGMENT_HINT : ""}`);
}

/** Hex payload mode: the body held in memory must hash to the signed value. */
export function assertPayloadSha256(signedHex: string, body: Uint8Array): void {
  assertPayloadDigest(signedHex, createHash("sha256").update(body).digest("hex"));
}

/** Same check for callers that streamed the body and computed its sha256 hex digest themselves. */
export function assertPayloadDigest(signedHex: string, actualHex: string): void {
  if (actualHex.toLowerCase() !== signedHex.toLowerCase()) {
    throw new S3AuthError("XAmzContentSHA256Mismatch", "请求体的 SHA-256 与 x-amz-content-sha256 不一致");
  }
}
