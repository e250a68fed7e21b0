/**
 * Bucket operations. Kura has no buckets: every name is accepted and means "the user's objects".
 * ListBuckets shows the one placeholder name the console hands out; CreateBucket is a no-op 200 so
 * rclone (which creates the bucket before its first upload) never fails.
 */
import type { AppContext } from "../../context";
import { S3Error } from "../errors";
import { hasObjects } from "../object-repo";
import type { S3Request } from "../request";
import { el, S3_NS, xmlResponse } from "../xml";

/** The placeholder bucket of the s3-credential endpoint. */
export const PLACEHOLDER_BUCKET = "kura";
const REGION = "us-east-1";

export function listBuckets(req: S3Request): Response {
  return xmlResponse(
    el(
      "ListAllMyBucketsResult",
      [
        el("Owner", [el("ID", req.user.id), el("DisplayName", req.user.name)]),
        el("Buckets", el("Bucket", [el("Name", PLACEHOLDER_BUCKET), el("CreationDate", new Date(0).toISOString())])),
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
