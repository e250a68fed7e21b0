/**
 * One authenticated `/s3/` request: who sent it (token + owner, from the SigV4 access key), which bucket
 * and key it names, and its query. Kura has no buckets: any name is accepted and ignored.
 */
import { hasUploadScope, resolveS3Credential, TokenRepo, type TokenRow } from "../auth/tokens";
import type { UserRow } from "../users/repo";
import type { AppContext } from "../context";
import { rawTarget } from "../shared/url-target";
import { S3Error } from "./errors";
import { dotSegmentOrigins } from "./dot-segments";
import { storedMeta } from "./object-meta";
import { verifySigV4, type SigV4Auth } from "./sigv4";
import { uploadIdleMs } from "../http/idle-limits";

/** The one bucket of every S3 credential (the `bucket` of the s3-credential endpoint). */
export const PLACEHOLDER_BUCKET = "kura";

export interface S3Request {
  request: Request;
  method: string;
  bucket: string;
  /** Decoded object key; "" for bucket-level requests. */
  key: string;
  /** Decoded query parameters (first value wins). */
  query: Map<string, string>;
  auth: SigV4Auth;
  token: TokenRow;
  user: UserRow;
  requestId: string;
  /** Longest silence while the body arrives (`upload_idle_timeout_seconds`): RequestTimeout after it. */
  idleMs: number;
}

/** Raw path after `/s3`, percent-decoded per segment: `/b/k/x` → bucket `b`, key `k/x`. */
export function splitS3Path(rawPath: string): { bucket: string; key: string } {
  const rest = rawPath.replace(/^\/s3(?=\/|$)/, "").replace(/^\//, "");
  const slash = rest.indexOf("/");
  const decode = (s: string) => {
    try {
      return decodeURIComponent(s);
    } catch {
      throw new S3Error("InvalidURI", "请求路径中的百分号编码无效");
    }
  };
  if (slash < 0) return { bucket: decode(rest), key: "" };
  return {
    bucket: decode(rest.slice(0, slash)),
    key: rest
      .slice(slash + 1)
      .split("/")
      .map(decode)
      .join("/"),
  };
}

function parseQuery(raw: string): Map<string, string> {
  const out = new Map<string, string>();
  for (const [k, v] of new URLSearchParams(raw)) if (!out.has(k)) out.set(k, v);
  return out;
}

/** Verifies the signature and the token's upload scope; throws S3Error/S3AuthError otherwise. */
export function authenticateS3(app: AppContext, request: Request, requestId: string): S3Request {
  const { path, query } = rawTarget(request.url);
  let principal: ReturnType<typeof resolveS3Credential>;
  const auth = verifySigV4(
    { method: request.method, url: request.url, headers: request.headers },
    {
      lookupSecret: (id) => {
        principal = resolveS3Credential(app, id);
        return principal?.secret;
      },
      mountPrefix: "/s3",
      // Bun resolves `./` and `../` in the path before Kura sees it: such keys are told so (dot-segments.ts).
      resolvedOrigins: (received) => dotSegmentOrigins(received, "/s3", PLACEHOLDER_BUCKET),
    },
  );
  const found = principal!;
  if (!hasUploadScope(found.token)) throw new S3Error("AccessDenied", "该上传令牌没有上传权限");
  new TokenRepo(app.db).touch(found.token);
  const { bucket, key } = splitS3Path(path);
  const idleMs = uploadIdleMs(app.settings.get().upload_idle_timeout_seconds);
  return { request, method: request.method, bucket, key, query: parseQuery(query), auth, token: found.token, user: found.user, requestId, idleMs };
}

/** The headers of a request stored in s3_meta: x-amz-meta-* (lower-case names), Content-Type and the system metadata (storedMeta). */
export function requestMeta(request: Request): Record<string, string> {
  return storedMeta(request.headers);
}

/** The absolute URL of an object on the /s3/ surface, its key percent-encoded segment by segment (S3's `Location`). */
export function objectUrl(origin: string, bucket: string, key: string): string {
  return `${origin}/s3/${bucket}/${key.split("/").map(encodeURIComponent).join("/")}`;
}

/** S3's limit on a key: 1024 bytes of its UTF-8 encoding (a CJK character takes 3 of them, an emoji 4). */
export const MAX_KEY_BYTES = 1024;

/** The key's length as S3 counts it: UTF-8 bytes, not the UTF-16 units of `key.length`. */
export const keyBytes = (key: string): number => Buffer.byteLength(key, "utf8");

/**
 * Object keys become /o/<user>/<key> aliases: relative, no empty, `.` or `..` segments, no control
 * characters or backslash. Length is not part of it: a new key is held to MAX_KEY_BYTES where it is
 * written (requireValidKey), while a key stored before that limit counted bytes (or by POST
 * /api/upload) must stay readable and deletable.
 */
export function validObjectKey(key: string): boolean {
  // An empty key, a leading slash and a `//` all make an empty segment.
  return !key.split("/").some((s) => s === "" || s === "." || s === "..") && !/[\u0000-\u001f\u007f\\]/.test(key);
}

/** A page size (`max-keys`, `max-uploads`): a non-negative integer, 1000 when absent, at most 1000; anything else InvalidArgument. */
export function pageSizeOf(req: Pick<S3Request, "query">, name: string): number {
  const raw = req.query.get(name);
  if (raw === undefined || raw === "") return 1000;
  if (!/^\d+$/.test(raw)) throw new S3Error("InvalidArgument", `${name} 必须是非负整数`);
  return Math.min(Number(raw), 1000);
}

/**
 * `encoding-type`: absent or empty leaves names as they are (as MinIO reads an empty one), `url`
 * percent-encodes them, anything else is InvalidArgument with AWS's ArgumentName/ArgumentValue.
 * A listing says `<EncodingType>url</EncodingType>` only when it encoded (encodesNames): claiming it
 * for raw names made clients decode them, turning a `%41` in a key into `A`.
 */
export function nameEncoder(req: Pick<S3Request, "query">): (name: string) => string {
  const type = req.query.get("encoding-type");
  if (type === undefined || type === "") return (name) => name;
  if (type !== "url") {
    throw new S3Error("InvalidArgument", "encoding-type 只支持 url", 400, {}, { ArgumentName: "encoding-type", ArgumentValue: type });
  }
  return (name) => encodeURIComponent(name);
}

/** Whether the listing's names are url-encoded (nameEncoder), so it answers `<EncodingType>url</EncodingType>`. */
export const encodesNames = (req: Pick<S3Request, "query">): boolean => req.query.get("encoding-type") === "url";

/** `partNumber` (UploadPart, GET/HEAD of a part): an integer from 1 to 10000, else InvalidArgument. */
export function partNumberOf(raw: string): number {
  const n = /^\d{1,5}$/.test(raw) ? Number(raw) : 0;
  if (n < 1 || n > 10000) throw new S3Error("InvalidArgument", "partNumber 必须是 1 到 10000 之间的整数");
  return n;
}
