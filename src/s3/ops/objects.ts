/**
 * Object operations: PutObject (through Kura's one upload pipeline) and HeadObject/GetObject (with
 * Range). Keys are the user's /o/ aliases; other users' keys are invisible. Deletes: delete.ts.
 */
import { basename } from "node:path";
import type { AppContext } from "../../context";
import { parseSqlTime } from "../../db/time";
import { HEAD_LENGTH_HEADER } from "../../delivery/serve-image";
import { openBlob } from "../../images/read";
import type { UploadGate } from "../../images/upload/limits";
import { tempPath } from "../../images/upload/receive";
import { runUpload } from "../../images/upload/service";
import { consumeBody, receiveToFile, type BodyDigests } from "../body";
import { EMPTY_MD5, isFolderKey, isFolderObject, putFolder } from "../folders";
import { S3Error, noSuchKey } from "../errors";
import { sendableHeaderValue, SYSTEM_META_HEADERS } from "../object-meta";
import { objectByKey, objectEtag, parseMeta, rememberUploadMd5, setObjectMeta, type S3Object } from "../object-repo";
import { etagList, keyUnchanged, writeExpectation, type KeyExpectation } from "../write-conditions";
import { refuseUnsupportedFeatures, requireMetadataSize } from "../write-headers";
import { keyBytes, MAX_KEY_BYTES, partNumberOf, requestMeta, validObjectKey, type S3Request } from "../request";

export const maxUploadBytes = (app: AppContext) => app.settings.get().max_upload_mb * 1024 * 1024;

/** A key to write must fit S3's 1024 UTF-8 bytes; S3 answers a longer one with 400 KeyTooLongError, which clients map. */
export function requireKeyLength(key: string) {
  const size = keyBytes(key);
  if (size > MAX_KEY_BYTES) {
    throw new S3Error(
      "KeyTooLongError",
      `对象键过长：UTF-8 编码为 ${size} 字节，最多 ${MAX_KEY_BYTES} 字节`,
      400,
      {},
      { Size: size, MaxSizeAllowed: MAX_KEY_BYTES },
    );
  }
}

/** The key an object is written under (PutObject, CopyObject's destination, CreateMultipartUpload, POST Object). */
export function requireValidKey(key: string) {
  requireKeyLength(key);
  if (!validObjectKey(key)) throw new S3Error("InvalidArgument", "无效的对象键：不能以 / 开头，不能含空段、. 或 .. 段、反斜杠或控制字符");
}

/**
 * Stores bytes that `receive` writes to a temp file as the object `key` of the requesting user:
 * exif policy passthrough (it does not apply to S3), the key becomes (or re-points) the /o/ alias.
 * Admission (concurrency, rate) happens before a byte is read.
 */
export async function storeObject(
  app: AppContext,
  gate: UploadGate,
  req: Pick<S3Request, "user" | "token">,
  key: string,
  meta: Record<string, string>,
  receive: (path: string) => Promise<BodyDigests>,
  expected?: KeyExpectation,
  /** The multipart upload this store completes: its own quota check leaves that upload's parts out. */
  completes?: string,
): Promise<{ id: string; digests: BodyDigests }> {
  let digests: BodyDigests | undefined;
  const { id } = await runUpload(app, gate, {
    userId: req.user.id,
    tokenId: req.token.id,
    md5Known: true,
    receive: async () => {
      const path = tempPath(app.paths.tmp, "s3");
      digests = await receive(path);
      return {
        file: { path, size: digests.size, fileName: basename(key), sha256: digests.sha256 },
        options: {
          exifPolicy: "passthrough",
          objectKey: key,
          ...(expected && { beforeKeyMoves: () => keyUnchanged(app, req.user.id, key, expected) }),
          ...(completes && { quotaLeavesOut: completes }),
        },
      };
    },
  });
  // A DeleteObject of the same key may have run while the upload removed its temp files: the
  // PUT still happened first, so it answers 200 (the delete then removed it, as S3 orders them).
  const image = app.images.view(id);
  if (image) {
    rememberUploadMd5(app, image.id, image.blob_id, digests!.md5);
    setObjectMeta(app, id, meta);
  }
  app.lookups.forget(id);
  app.lookups.forgetAlias(req.user.id, key);
  return { id, digests: digests! };
}

/**
 * The metadata a new object's write stores (PutObject, CreateMultipartUpload): refused before a body
 * byte is read when it asks for what Kura does not do (SSE-C, KMS, object lock, another storage
 * class) or carries more than 2 KB of x-amz-meta-*.
 */
export function writeMeta(req: S3Request): Record<string, string> {
  refuseUnsupportedFeatures(req.request.headers);
  const meta = requestMeta(req.request);
  requireMetadataSize(meta);
  return meta;
}

export async function putObject(app: AppContext, gate: UploadGate, req: S3Request): Promise<Response> {
  // Before the folder branch: a folder marker is a key too.
  requireKeyLength(req.key);
  const meta = writeMeta(req);
  if (isFolderKey(req.key)) return putFolderMarker(app, req);
  requireValidKey(req.key);
  const expected = await writeExpectation(app, req, req.key);
  const receive = (path: string) => receiveToFile(req, path, maxUploadBytes(app));
  const { digests } = await storeObject(app, gate, req, req.key, meta, receive, expected);
  return new Response(null, { status: 200, headers: { etag: `"${digests.md5}"` } });
}

/** A zero-byte PUT of `dir/`: recorded as a folder marker (any content is refused, it could not be an image). */
async function putFolderMarker(app: AppContext, req: S3Request): Promise<Response> {
  try {
    await consumeBody(req, 0, () => {});
  } catch (err) {
    if (err instanceof S3Error && err.code === "EntityTooLarge") {
      throw new S3Error("InvalidArgument", "以 / 结尾的键是文件夹标记，内容必须为空（0 字节）");
    }
    throw err;
  }
  putFolder(app, req.user.id, req.key);
  return new Response(null, { status: 200, headers: { etag: `"${EMPTY_MD5}"` } });
}

function findObject(app: AppContext, req: S3Request): S3Object {
  const object = objectByKey(app, req.user.id, req.key);
  if (!object) throw noSuchKey();
  return object;
}

/**
 * Headers S3 returns for an object: the stored image's own type (never the Content-Type the client
 * sent, nor any Content-Encoding), MD5 ETag, x-amz-meta-* and the stored system metadata
 * (Cache-Control, Content-Disposition, Content-Language, Expires), which `response-*` overrides.
 */
async function objectHeaders(app: AppContext, object: S3Object): Promise<Record<string, string>> {
  const headers: Record<string, string> = {
    "content-type": object.mime,
    etag: await objectEtag(app, object),
    "last-modified": parseSqlTime(object.created_at).toUTCString(),
    "accept-ranges": "bytes",
  };
  const meta = parseMeta(object.s3_meta);
  // A value no header can carry (stored before forms were read as bytes) is left out, never a 500.
  for (const [name, value] of Object.entries(meta)) if (name.startsWith("x-amz-meta-") && sendableHeaderValue(value)) headers[name] = value;
  for (const name of SYSTEM_META_HEADERS) if (meta[name] && sendableHeaderValue(meta[name])) headers[name] = meta[name];
  return headers;
}

/** `bytes=a-b`, `bytes=a-`, `bytes=-n` → inclusive range; undefined to serve it whole (absent or multi-range). */
export function parseRange(header: string | null, size: number): { start: number; end: number } | undefined {
  if (!header) return undefined;
  const m = /^bytes=(\d*)-(\d*)$/.exec(header.trim());
  if (!m) return undefined;
  const [, a, b] = m as unknown as [string, string, string];
  let start: number;
  let end: number;
  if (a === "") {
    if (b === "") return undefined;
    const suffix = Number(b);
    if (suffix === 0) throw new S3Error("InvalidRange", "请求的字节范围无效", 416, { "content-range": `bytes */${size}` });
    start = Math.max(0, size - suffix);
    end = size - 1;
  } else {
    start = Number(a);
    end = b === "" ? size - 1 : Math.min(Number(b), size - 1);
    if (b !== "" && Number(b) < start) return undefined;
  }
  if (start >= size) throw new S3Error("InvalidRange", "请求的字节范围无效", 416, { "content-range": `bytes */${size}` });
  return { start, end };
}

/** S3's `response-*` query parameters of a GET/HEAD and the header each one sets in the answer. */
const RESPONSE_OVERRIDES: Record<string, string> = {
  "response-content-type": "content-type",
  "response-content-disposition": "content-disposition",
  "response-cache-control": "cache-control",
  "response-content-language": "content-language",
  "response-content-encoding": "content-encoding",
  "response-expires": "expires",
};

/**
 * Types an override may set: the image types and the download ones. Never a type a browser would run
 * as a page or script: the answer comes from Kura's own origin, which serves no HTML or SVG at all.
 */
const OVERRIDE_TYPES =
  /^(?:image\/(?:jpeg|png|gif|webp|avif|bmp|tiff|heic|heif|jxl|apng|x-icon|vnd\.microsoft\.icon)|application\/octet-stream|binary\/octet-stream)$/;

/**
 * The headers a signed GET/HEAD asks for with `response-content-type`, `-content-disposition` and the
 * others (what `getSignedUrl` with `ResponseContentDisposition` makes for "download as <name>" links).
 * Every /s3/ request is signed, as S3 requires for them. A value with control or non-ASCII characters
 * (a header cannot carry it; RFC 6266's `filename*=UTF-8''…` can) or another content type is 400.
 */
function responseOverrides(req: S3Request): Record<string, string> {
  const headers: Record<string, string> = {};
  for (const [param, header] of Object.entries(RESPONSE_OVERRIDES)) {
    const value = req.query.get(param);
    if (value === undefined) continue;
    if (!/^[\x20-\x7e]*$/.test(value)) throw new S3Error("InvalidArgument", `${param} 只能含可打印的 ASCII 字符（文件名请用 filename*=UTF-8''<百分号编码>）`);
    if (header === "content-type" && !OVERRIDE_TYPES.test(value.split(";")[0]!.trim().toLowerCase())) {
      throw new S3Error("InvalidArgument", "response-content-type 只能是图片类型或 application/octet-stream");
    }
    headers[header] = value;
  }
  return headers;
}

/**
 * `?partNumber=N` on GET/HEAD: the bytes of part N, as part-based downloaders start (the Java SDK v2's
 * multipart download, the Go SDK v2's transfer manager). Kura keeps no part boundaries after Complete,
 * so every object is one part: part 1 is the whole object (206 with its Content-Range; no
 * x-amz-mp-parts-count, which those clients read as "one part, done"), any other 416 InvalidPartNumber.
 * undefined without the parameter (or for an empty object, answered whole).
 */
function partRange(req: S3Request, size: number): { start: number; end: number } | undefined {
  const raw = req.query.get("partNumber");
  if (raw === undefined) return undefined;
  const n = partNumberOf(raw);
  if (req.request.headers.has("range")) throw new S3Error("InvalidRequest", "不能同时指定 Range 请求头和 partNumber 参数");
  if (n > 1) throw new S3Error("InvalidPartNumber", "请求的分片号超出对象的分片数（Kura 的对象只有 1 个分片）", 416);
  return size > 0 ? { start: 0, end: size - 1 } : undefined;
}

export async function getObject(app: AppContext, req: S3Request): Promise<Response> {
  const object = findObject(app, req);
  const headers = await objectHeaders(app, object);
  const precondition = evaluatePreconditions(req.request.headers, headers.etag!, parseSqlTime(object.created_at));
  if (precondition === 304) {
    return new Response(null, { status: 304, headers: { etag: headers.etag!, "last-modified": headers["last-modified"]! } });
  }
  if (precondition === 412) throw new S3Error("PreconditionFailed", "对象不满足 If-Match / If-Unmodified-Since 条件");
  const range = partRange(req, object.size) ?? parseRange(req.request.headers.get("range"), object.size);
  const length = range ? range.end - range.start + 1 : object.size;
  if (range) headers["content-range"] = `bytes ${range.start}-${range.end}/${object.size}`;
  Object.assign(headers, responseOverrides(req));
  const status = range ? 206 : 200;
  if (req.method === "HEAD") {
    // Bun would rewrite Content-Length of a bodiless response; the fetch handler restores it for HEAD.
    return new Response(null, { status, headers: { ...headers, [HEAD_LENGTH_HEADER]: String(length) } });
  }
  if (isFolderObject(object)) return new Response(null, { status, headers: { ...headers, "content-length": "0" } });
  const blob = await openBlob(app, { id: object.blob_id, storage_key: object.storage_key }, range ? { start: range.start, end: range.end } : undefined);
  return new Response(blob.file ?? blob.stream, { status, headers: { ...headers, "content-length": String(length) } });
}

/** HTTP date in whole seconds, or undefined when unparseable (then the header is ignored, as S3 does). */
function httpDate(header: string | null): number | undefined {
  if (!header) return undefined;
  const ms = Date.parse(header);
  return Number.isNaN(ms) ? undefined : Math.floor(ms / 1000);
}

/** RFC 9110 §13.2.2 order: If-Match, If-Unmodified-Since, If-None-Match, If-Modified-Since. */
export function evaluatePreconditions(headers: Headers, etag: string, modified: Date): 200 | 304 | 412 {
  const modifiedS = Math.floor(modified.getTime() / 1000);
  const ifMatch = headers.get("if-match");
  if (ifMatch !== null) {
    const tags = etagList(ifMatch);
    if (!tags.includes("*") && !tags.includes(etag)) return 412;
  } else {
    const since = httpDate(headers.get("if-unmodified-since"));
    if (since !== undefined && modifiedS > since) return 412;
  }
  const ifNoneMatch = headers.get("if-none-match");
  if (ifNoneMatch !== null) {
    const tags = etagList(ifNoneMatch);
    return tags.includes("*") || tags.includes(etag) ? 304 : 200;
  }
  const since = httpDate(headers.get("if-modified-since"));
  return since !== undefined && modifiedS <= since ? 304 : 200;
}

// The delete operations live in delete.ts; the scale tests reach deleteKeys here.
export { deleteKeys } from "./delete";
