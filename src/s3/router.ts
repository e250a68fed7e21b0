/**
 * The S3-compatible upload surface under `/s3/` (path-style: `/s3/<bucket>/<key>`). Every request is
 * SigV4-verified against the upload token's S3 credential, then dispatched by method and query the way
 * S3 does. Errors are S3 XML bodies. Operations Kura does not offer answer 501 NotImplemented.
 */
import { Elysia } from "elysia";
import { randomBytes } from "node:crypto";
import type { AppContext } from "../context";
import { errorResponse, notImplemented, toS3Error } from "./errors";
import { rawTarget } from "../http/raw-url";
import { isDiskFull } from "../errors";
import { logDiskFull } from "../http/disk-full";
import { authenticateS3, splitS3Path, type S3Request } from "./request";
import { isPostPolicyUpload, postObject } from "./ops/post-object";
import { createBucket, deleteBucket, requireOwnBucket, getLocation, getVersioning, headBucket, listBuckets } from "./ops/buckets";
import { copyObject } from "./ops/copy";
import { listObjectsV1, listObjectsV2 } from "./ops/list";
import { listMultipartUploads } from "./ops/list-uploads";
import { abortMultipartUpload, completeMultipartUpload, createMultipartUpload, uploadPart } from "./ops/multipart";
import { deleteObject, deleteObjects, getObject, putObject } from "./ops/objects";

/** S3 sub-resources (`?acl`, `?tagging`…): the ones not handled below are NotImplemented, never mistaken for a plain GET/PUT. */
const SUBRESOURCES = [
  "accelerate",
  "acl",
  "analytics",
  "attributes",
  "cors",
  "delete",
  "encryption",
  "intelligent-tiering",
  "inventory",
  "legal-hold",
  "lifecycle",
  "location",
  "logging",
  "metrics",
  "notification",
  "object-lock",
  "ownershipControls",
  "partNumber",
  "policy",
  "policyStatus",
  "publicAccessBlock",
  "replication",
  "requestPayment",
  "restore",
  "retention",
  "select",
  "tagging",
  "torrent",
  "uploadId",
  "uploads",
  "versioning",
  "versions",
  "website",
];

function subresource(req: S3Request): string | undefined {
  return SUBRESOURCES.find((name) => req.query.has(name));
}

type Handler = (req: S3Request) => Response | Promise<Response>;

export function s3Routes(app: AppContext) {
  // The same admission gate as the other upload surfaces: concurrency and per-user rate are global.
  const uploadGate = () => app.uploadGate;

  const bucketOp = (req: S3Request): Handler => {
    const sub = subresource(req);
    switch (req.method) {
      case "GET":
        if (sub === "versioning") return getVersioning;
        if (sub === "location") return getLocation;
        if (sub === "uploads") return (r) => listMultipartUploads(app, r);
        if (sub) break;
        return req.query.get("list-type") === "2" ? (r) => listObjectsV2(app, r) : (r) => listObjectsV1(app, r);
      case "HEAD":
        if (!sub) return headBucket;
        break;
      case "PUT":
        if (!sub) return createBucket;
        break;
      case "DELETE":
        if (!sub) return (r) => deleteBucket(app, r);
        break;
      case "POST":
        if (sub === "delete") return (r) => deleteObjects(app, r);
        break;
    }
    throw notImplemented(`${req.method} 存储桶${sub ? ` ?${sub}` : ""}`);
  };

  const objectOp = (req: S3Request): Handler => {
    const sub = subresource(req);
    const copySource = req.request.headers.has("x-amz-copy-source");
    switch (req.method) {
      case "GET":
      case "HEAD":
        if (!sub) return (r) => getObject(app, r);
        break;
      case "PUT":
        if (sub === "partNumber" || sub === "uploadId") {
          if (copySource) break; // UploadPartCopy
          return (r) => uploadPart(app, uploadGate(), r);
        }
        if (sub) break;
        return copySource ? (r) => copyObject(app, r) : (r) => putObject(app, uploadGate(), r);
      case "POST":
        if (sub === "uploads") return (r) => createMultipartUpload(app, r);
        if (sub === "uploadId") return (r) => completeMultipartUpload(app, uploadGate(), r);
        break;
      case "DELETE":
        if (sub === "uploadId") return (r) => abortMultipartUpload(app, r);
        if (!sub) return (r) => deleteObject(app, r);
        break;
    }
    throw notImplemented(`${req.method} 对象${sub ? ` ?${sub}` : copySource ? "（复制分片）" : ""}`);
  };

  /** Browser forms carry their signature in the policy fields, not in headers or the query. */
  const formUpload = (request: Request, path: string): Promise<Response> => {
    const { bucket, key } = splitS3Path(path);
    requireOwnBucket(bucket);
    if (!bucket || key) throw notImplemented("POST 表单上传只能提交到存储桶地址（/s3/kura）");
    return postObject(app, uploadGate(), request, bucket);
  };

  const signedOperation = (request: Request, requestId: string): Promise<Response> | Response => {
    const req = authenticateS3(app, request, requestId);
    requireOwnBucket(req.bucket);
    if (req.bucket) return (req.key === "" ? bucketOp(req) : objectOp(req))(req);
    if (req.method !== "GET" && req.method !== "HEAD") throw notImplemented(`${req.method} /s3/`);
    return listBuckets(req);
  };

  const handle = async (request: Request): Promise<Response> => {
    const requestId = randomBytes(8).toString("hex").toUpperCase();
    const resource = new URL(request.url).pathname;
    let response: Response;
    try {
      const target = rawTarget(request.url);
      response = isPostPolicyUpload(request, target.query) ? await formUpload(request, target.path) : await signedOperation(request, requestId);
    } catch (err) {
      const s3 = toS3Error(err);
      if (s3.status >= 500 && s3.code === "InternalError") {
        app.log.error("S3 请求处理失败", { method: request.method, path: resource, err: err instanceof Error ? err.message : String(err) });
      } else if (isDiskFull(err)) logDiskFull(app.log, request, err);
      response = errorResponse(s3, { method: request.method, resource, requestId });
    }
    response.headers.set("x-amz-request-id", requestId);
    return response;
  };

  const opts = { parse: "none" as const };
  return new Elysia()
    .get("/s3", ({ request }) => handle(request), opts)
    .put("/s3", ({ request }) => handle(request), opts)
    .post("/s3", ({ request }) => handle(request), opts)
    .delete("/s3", ({ request }) => handle(request), opts)
    .get("/s3/*", ({ request }) => handle(request), opts)
    .put("/s3/*", ({ request }) => handle(request), opts)
    .post("/s3/*", ({ request }) => handle(request), opts)
    .delete("/s3/*", ({ request }) => handle(request), opts);
}
