/**
 * images.s3_meta: the JSON of an object's stored headers (x-amz-meta-*, the upload's content-type, the
 * system metadata below) and, for an object completed from parts, its multipart ETag.
 */
import type { S3Object } from "./object";

/**
 * Standard headers S3 keeps with an object as system metadata and answers GET/HEAD with (an app sets
 * `CacheControl` or `ContentDisposition` on upload and reads them back). Only on the /s3/ surface:
 * /o/ and /i/ never read s3_meta, so nothing stored here changes what public delivery sends.
 * Content-Encoding is not among them: a stored object is always the image itself (its bytes were
 * checked as one), so any encoding claimed for it is false: PicGo's `base64`, the SDK's `aws-chunked`,
 * and a `gzip` would make browsers fail to show the image.
 */
export const SYSTEM_META_HEADERS = ["cache-control", "content-disposition", "content-language", "expires"] as const;

const KEPT_HEADERS = new Set<string>(["content-type", ...SYSTEM_META_HEADERS]);

/**
 * What a write stores of its headers (or a browser form's fields): every x-amz-meta-* (an empty value is
 * metadata too), and Content-Type and the system metadata when not empty.
 */
export function storedMeta(headers: Iterable<readonly [string, string]>): Record<string, string> {
  const meta: Record<string, string> = {};
  for (const [rawName, value] of headers) {
    const name = rawName.toLowerCase();
    if (name.startsWith("x-amz-meta-") || (KEPT_HEADERS.has(name) && value !== "")) meta[name] = value;
  }
  return meta;
}

export function parseMeta(json: string): Record<string, string> {
  if (!json) return {};
  try {
    const parsed = JSON.parse(json) as unknown;
    return parsed && typeof parsed === "object" ? (parsed as Record<string, string>) : {};
  } catch {
    return {};
  }
}

/**
 * Where s3_meta keeps the ETag CompleteMultipartUpload answered (`<md5 of the part MD5s>-<parts>`). S3
 * gives the object that ETag on HEAD, GET and in listings too, and clients compare them: rclone (newer
 * than the 1.60 tested here) HEADs the object after a multipart upload and fails it ("multipart upload
 * corrupted: Etag differ") unless the ETag equals the one it computed from its parts, and a later
 * `If-Match` with the upload's ETag must hold. Not an `x-amz-meta-` name, so it is never sent as a header; a copy is a new single-part
 * object with the plain MD5 (`copyableMeta`).
 */
export const MULTIPART_ETAG = "multipart-etag";

/** The multipart ETag stored for the object, if it was completed from parts (cheap for the others: no JSON parse). */
export function multipartEtagOf(object: Pick<S3Object, "s3_meta">): string | undefined {
  if (!object.s3_meta.includes(MULTIPART_ETAG)) return undefined;
  return parseMeta(object.s3_meta)[MULTIPART_ETAG];
}

/**
 * A browser form's fields as the headers they stand for. busboy decodes a field as UTF-8 text, while
 * Bun hands a header over byte for byte (one Latin-1 character per byte): stored as text, a `中` in
 * an `x-amz-meta-*` field could not be sent back as a header and HEAD failed. As bytes, it goes back
 * out as the same UTF-8 a header would have carried, and is counted in bytes like one.
 */
export function formFieldsAsHeaders(fields: Record<string, string>): [string, string][] {
  return Object.entries(fields).map(([name, value]) => [name, Buffer.from(value, "utf8").toString("latin1")]);
}

/** Whether a stored value can go out as a header value (no line breaks, no characters beyond a byte). */
export const sendableHeaderValue = (value: string): boolean => !/[^\t\x20-\xff]/.test(value);

/** Stored metadata a CopyObject (COPY directive) carries over: all but the source's multipart ETag. */
export function copyableMeta(json: string): Record<string, string> {
  const { [MULTIPART_ETAG]: _, ...meta } = parseMeta(json);
  return meta;
}
