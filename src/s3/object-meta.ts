/**
 * images.s3_meta: the JSON of an object's stored headers (x-amz-meta-*, the upload's content-type) and,
 * for an object completed from parts, its multipart ETag.
 */
import type { S3Object } from "./object";

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

/** Stored metadata a CopyObject (COPY directive) carries over: all but the source's multipart ETag. */
export function copyableMeta(json: string): Record<string, string> {
  const { [MULTIPART_ETAG]: _, ...meta } = parseMeta(json);
  return meta;
}
