/**
 * Bucket operations. Each credential has exactly one bucket, `kura` (the name the console hands out):
 * it holds the user's objects. Any other name is NoSuchBucket, so a typo in a sync target can never
 * address (and delete) the library. CreateBucket of `kura` is a no-op 200 so rclone, which creates the
 * bucket before its first upload, never fails.
 */
import type { AppContext } from "../../context";
import { S3Error } from "../errors";
import { hasObjects } from "../object-repo";
import { PLACEHOLDER_BUCKET, type S3Request } from "../request";
import { el, S3_NS, xmlResponse } from "../xml";
import { parseSqlTime } from "../../db/time";

const REGION = "us-east-1";

/** Throws NoSuchBucket unless the request names the credential's bucket (bucket-less requests pass). */
export function requireOwnBucket(bucket: string) {
  if (bucket === "" || bucket === PLACEHOLDER_BUCKET) return;
  throw new S3Error("NoSuchBucket", `存储桶 ${bucket} 不存在：Kura 的每个 S3 凭据只有一个存储桶 ${PLACEHOLDER_BUCKET}`);
}

export function listBuckets(req: S3Request): Response {
  return xmlResponse(
    el(
      "ListAllMyBucketsResult",
      [
        el("Owner", [el("ID", req.user.id), el("DisplayName", req.user.name)]),
        el("Buckets", el("Bucket", [el("Name", PLACEHOLDER_BUCKET), el("CreationDate", parseSqlTime(req.token.created_at).toISOString())])),
      ],
      { xmlns: S3_NS },
    ),
  );
}

export function createBucket(req: S3Request): Response {
  return new Response(null, { status: 200, headers: { location: `/${req.bucket}` } });
}

export function headBucket(): Response {
  return new Response(null, { status: 200, headers: { "x-amz-bucket-region": REGION } });
}

/** Deleting "the bucket" would mean deleting every keyed image: refused while there are any, as S3 does. */
export function deleteBucket(app: AppContext, req: S3Request): Response {
  if (hasObjects(app, req.user.id)) throw new S3Error("BucketNotEmpty", "存储桶不为空（Kura 不会通过删除存储桶来删除图片）");
  return new Response(null, { status: 204 });
}

/** Never versioned: an empty configuration (rclone purge asks). */
export function getVersioning(): Response {
  return xmlResponse(el("VersioningConfiguration", undefined, { xmlns: S3_NS }));
}

export function getLocation(): Response {
  return xmlResponse(el("LocationConstraint", undefined, { xmlns: S3_NS }));
}
