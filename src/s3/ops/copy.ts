/**
 * CopyObject within one user's objects. A copy to a new key is one more image reference to the same
 * blob (no bytes move); a copy onto itself with `x-amz-metadata-directive: REPLACE` only replaces the
 * stored x-amz-meta-* headers (rclone fixes modification times this way).
 */
import { basename } from "node:path";
import type { AppContext } from "../../context";
import { expiryTime, parseSqlTime, sqlTime } from "../../db/time";
import { supersedeObjectKey } from "../../images/repos/object-key";
import { addBlobReference, insertImageRow, ownDigestsOfImage } from "../../images/repos/references";
import { checkQuota } from "../../images/store";
import { S3Error, noSuchKey } from "../errors";
import { copyableMeta, objectByKey, objectEtag, setObjectMeta, type S3Object } from "../object-repo";
import { keyUnchanged, writeExpectation, type KeyExpectation } from "../write-conditions";
import { refuseUnsupportedFeatures, requireMetadataSize } from "../write-headers";
import { requestMeta, validObjectKey, type S3Request } from "../request";
import { el, S3_NS, xmlResponse } from "../xml";
import { requireOwnBucket } from "./buckets";
import { evaluatePreconditions, requireValidKey } from "./objects";
import { inWriteTransaction } from "../../db/write-transaction";

/**
 * `x-amz-copy-source: [/]bucket/url-encoded-key[?versionId=…]` → the decoded key. The bucket is never
 * versioned, so its objects have the one version id S3 gives objects written while unversioned,
 * `null`. Any other id is refused as S3 refuses an id it never issued (400 InvalidArgument
 * "Invalid version id specified"), never answered with the current object.
 */
export function copySourceKey(header: string): string {
  const trimmed = header.trim().replace(/^\//, "");
  const query = trimmed.indexOf("?");
  const value = query < 0 ? trimmed : trimmed.slice(0, query);
  const versionId = query < 0 ? null : new URLSearchParams(trimmed.slice(query + 1)).get("versionId");
  if (versionId !== null && versionId !== "null") {
    throw new S3Error("InvalidArgument", "x-amz-copy-source 中的版本 ID 无效：该存储桶未启用版本控制，只接受 versionId=null");
  }
  // `encodeURIComponent("bucket/key")` (the form in the AWS SDK's own examples) encodes the separator too.
  const slash = value.indexOf("/") > 0 ? value.indexOf("/") : value.toUpperCase().indexOf("%2F");
  if (slash <= 0) throw new S3Error("InvalidArgument", "x-amz-copy-source 格式应为 <bucket>/<key>");
  const separator = value[slash] === "/" ? 1 : 3;
  requireOwnBucket(value.slice(0, slash));
  try {
    return decodeURIComponent(value.slice(slash + separator));
  } catch {
    throw new S3Error("InvalidArgument", "x-amz-copy-source 中的百分号编码无效");
  }
}

/** TTL of a new reference: the owner's default, else the global default (hours; 0 = permanent). */
function defaultTtlSeconds(app: AppContext, userId: string): number {
  const hours = app.users.byId(userId)?.default_ttl_hours ?? app.settings.get().default_ttl_hours;
  return hours * 3600;
}

/** One more reference to the source's blob under `key`, re-pointing the alias if the key was taken. */
function addReference(app: AppContext, req: S3Request, source: S3Object, key: string, expected: KeyExpectation | undefined): string {
  const ttl = defaultTtlSeconds(app, req.user.id);
  const now = Date.now();
  const id = inWriteTransaction(app.db, () => {
    // The same check as every upload's commit: open multipart uploads count too.
    checkQuota(app, req.user.id, source.size);
    if (expected) keyUnchanged(app, req.user.id, key, expected);
    supersedeObjectKey(app.db, req.user.id, key);
    addBlobReference(app.db, source.blob_id);
    const fresh = app.images.unusedId();
    insertImageRow(app.db, {
      id: fresh,
      blobId: source.blob_id,
      userId: req.user.id,
      tokenId: req.token.id,
      fileName: basename(key).slice(0, 255),
      objectKey: key,
      expireAt: ttl ? expiryTime(now, ttl) : null,
      ttlSeconds: ttl || null,
      createdAt: sqlTime(now),
      // A copy of the user's own object knows of the bytes what its source's upload computed.
      ownDigests: ownDigestsOfImage(app.db, source.id),
    });
    return fresh;
  });
  app.lookups.forgetAlias(req.user.id, key);
  return id;
}

/** `x-amz-copy-source-if-*` as the plain conditional headers (bare ETags are quoted where they are compared: `etagList`). */
function copySourceConditions(headers: Headers): Headers | undefined {
  let out: Headers | undefined;
  for (const name of ["if-match", "if-none-match", "if-modified-since", "if-unmodified-since"]) {
    const value = headers.get(`x-amz-copy-source-${name}`);
    if (value === null) continue;
    out ??= new Headers();
    out.set(name, value);
  }
  return out;
}

/**
 * The copy-source conditions hold for `source`? Evaluated like GET's (RFC 9110 order, so if-match true
 * with if-unmodified-since false copies, as S3 documents), but every failure is 412 PreconditionFailed:
 * CopyObject has no 304, and nothing is copied.
 */
async function requireCopyConditions(app: AppContext, req: S3Request, source: S3Object): Promise<void> {
  const conditions = copySourceConditions(req.request.headers);
  if (!conditions) return;
  if (evaluatePreconditions(conditions, await objectEtag(app, source), parseSqlTime(source.created_at)) !== 200) {
    throw new S3Error("PreconditionFailed", "源对象不满足 x-amz-copy-source-if-* 条件，未复制");
  }
}

export async function copyObject(app: AppContext, req: S3Request): Promise<Response> {
  requireValidKey(req.key);
  // The copy's own encryption, lock or class (and an SSE-C key for the source): refused, not dropped.
  refuseUnsupportedFeatures(req.request.headers);
  const sourceKey = copySourceKey(req.request.headers.get("x-amz-copy-source") ?? "");
  const source = validObjectKey(sourceKey) ? objectByKey(app, req.user.id, sourceKey) : undefined;
  if (!source) throw noSuchKey();
  await requireCopyConditions(app, req, source);
  const expected = await writeExpectation(app, req, req.key);
  const directive = (req.request.headers.get("x-amz-metadata-directive") ?? "COPY").toUpperCase();
  if (directive !== "COPY" && directive !== "REPLACE") throw new S3Error("InvalidArgument", "x-amz-metadata-directive 只能是 COPY 或 REPLACE");
  // REPLACE takes every stored header from this request (user and system metadata, as S3 does), COPY all of the source's.
  const meta = directive === "REPLACE" ? requestMeta(req.request) : copyableMeta(source.s3_meta);
  if (directive === "REPLACE") requireMetadataSize(meta);
  let id = source.id;
  // AWS refuses a self-copy that changes nothing (a client that meant to change metadata and
  // forgot REPLACE learns it at once instead of seeing a 200 that did nothing).
  if (sourceKey === req.key && directive === "COPY") {
    throw new S3Error("InvalidRequest", "不能把对象复制到自身而不改变其元数据（请使用 x-amz-metadata-directive: REPLACE）");
  }
  if (sourceKey === req.key) {
    if (expected) keyUnchanged(app, req.user.id, req.key, expected);
    setObjectMeta(app, id, meta);
  } else {
    id = addReference(app, req, source, req.key, expected);
    setObjectMeta(app, id, meta);
  }
  app.lookups.forget(id);
  const copied = objectByKey(app, req.user.id, req.key)!;
  // The key's own Last-Modified (its upload time, what HEAD and listings say): a self-copy changes
  // metadata only, and claiming "now" here contradicted every later HEAD.
  const lastModified = parseSqlTime(copied.created_at).toISOString();
  return xmlResponse(el("CopyObjectResult", [el("LastModified", lastModified), el("ETag", await objectEtag(app, copied))], { xmlns: S3_NS }));
}
