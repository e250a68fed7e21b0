/**
 * The S3-compatible upload surface under `/s3/` (path-style: `/s3/<bucket>/<key>`). Every request is
 * SigV4-verified against the upload token's S3 credential, then dispatched by method and query the way
 * S3 does. Errors are S3 XML bodies. Operations Kura does not offer answer 501 NotImplemented.
 */
import { Elysia } from "elysia";
import { randomBytes } from "node:crypto";
import type { AppContext } from "../context";
import { errorResponse, notImplemented, S3Error, toS3Error } from "./errors";
import { isS3Path, rawTarget } from "../shared/url-target";
import { logServerFault } from "../ops/server-faults";
import { countHeldBytes } from "../images/store";
import { multipartBytes } from "./multipart-bytes";
import { authenticateS3, splitS3Path, type S3Request } from "./request";
import { isPostPolicyUpload, postObject } from "./ops/post-object";
import { createBucket, deleteBucket, requireOwnBucket, getLocation, getVersioning, headBucket, listBuckets } from "./ops/buckets";
import { copyObject } from "./ops/copy";
import { listObjectsV1, listObjectsV2 } from "./ops/list";
import { listMultipartUploads } from "./ops/list-uploads";
import { abortMultipartUpload, completeMultipartUpload, createMultipartUpload, uploadPart } from "./ops/multipart";
import { getObject, putObject } from "./ops/objects";
import { deleteObject, deleteObjects } from "./ops/delete";
import { listParts } from "./ops/list-parts";

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

/** The methods S3 has operations for (HEAD reaches the GET route). */
const S3_METHODS = new Set(["GET", "HEAD", "PUT", "POST", "DELETE"]);

/**
 * A request to `/s3` with any other method, answered as S3 answers it (an XML error) rather than by
 * the app-wide JSON 404 that unrouted methods get. A hook, not routes: OPTIONS, PATCH, PROPFIND…
 * all need it, and a catch-all route could not be documented in openapi.yaml. Nothing is read or
 * authenticated: browsers never sign a preflight, and no other method does anything.
 * - OPTIONS is a CORS preflight; Kura has no CORS configuration, so it is refused the way S3 refuses
 *   one on a bucket without a CORS configuration: 400 BadRequest without `Origin` or
 *   `Access-Control-Request-Method`, else 403 AccessForbidden "CORS is not enabled". A 405 would
 *   also fail the preflight, but tools that probe CORS recognise S3's answer.
 * - anything else: 405 MethodNotAllowed with `Allow`, as S3 answers a method it has no operation for.
 */
function otherMethod(request: Request): Response | undefined {
  if (S3_METHODS.has(request.method)) return undefined;
  const resource = rawTarget(request.url).path;
  if (!isS3Path(resource)) return undefined;
  const requestId = randomBytes(8).toString("hex").toUpperCase();
  const answer = (err: S3Error) => errorResponse(err, { method: request.method, resource, requestId });
  const type = resourceType(resource);
  if (request.method === "OPTIONS") {
    const origin = request.headers.get("origin");
    const method = request.headers.get("access-control-request-method");
    if (!origin) return answer(new S3Error("BadRequest", "CORS 预检请求缺少 Origin 头", 400));
    if (!method || !S3_METHODS.has(method)) return answer(new S3Error("BadRequest", `Access-Control-Request-Method 无效：${method ?? "（缺失）"}`, 400));
    return answer(
      new S3Error("AccessForbidden", "CORSResponse：Kura 的 S3 接口未启用 CORS，浏览器无法跨域访问", 403, {}, { Method: method, ResourceType: type }),
    );
  }
  return answer(
    new S3Error(
      "MethodNotAllowed",
      `S3 接口不支持 ${request.method} 方法`,
      405,
      { allow: "GET, HEAD, PUT, POST, DELETE" },
      { Method: request.method, ResourceType: type },
    ),
  );
}

/** S3's ResourceType of a path under /s3 (no decoding needed: only whether a bucket or key is named). */
function resourceType(path: string): string {
  const rest = path.replace(/^\/s3\/?/, "");
  const slash = rest.indexOf("/");
  if (rest === "") return "SERVICE";
  return slash >= 0 && slash < rest.length - 1 ? "OBJECT" : "BUCKET";
}

export function s3Routes(app: AppContext) {
  // Every upload's quota check (images/store.ts) counts the user's open multipart uploads too.
  countHeldBytes(app, (userId, leaveOut) => multipartBytes(app, userId, leaveOut));
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
    // The bucket is never versioned: its objects' one version id is `null`. Any other id is refused as
    // S3 refuses an id it never issued, never served or deleted as if it named the live object.
    const versionId = req.query.get("versionId");
    if (versionId !== undefined && versionId !== "null") throw new S3Error("InvalidArgument", "版本 ID 无效：该存储桶未启用版本控制，只接受 versionId=null");
    const sub = subresource(req);
    const copySource = req.request.headers.has("x-amz-copy-source");
    switch (req.method) {
      case "GET":
        if (req.query.has("uploadId")) return (r) => listParts(app, r);
        if (!sub || sub === "partNumber") return (r) => getObject(app, r);
        break;
      case "HEAD":
        if (!sub || sub === "partNumber") return (r) => getObject(app, r);
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
    const partCopy = copySource && req.method === "PUT" && (sub === "partNumber" || sub === "uploadId");
    throw notImplemented(`${req.method} 对象${sub ? ` ?${sub}` : ""}${partCopy ? "（复制分片 UploadPartCopy）" : ""}`);
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
    refuseBucketInHost(req.query);
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
      } else logServerFault(app.log, request, err);
      response = errorResponse(s3, { method: request.method, resource, requestId });
    }
    response.headers.set("x-amz-request-id", requestId);
    return response;
  };

  const opts = { parse: "none" as const };
  return new Elysia()
    .onRequest(({ request }) => otherMethod(request))
    .get("/s3", ({ request }) => handle(request), opts)
    .put("/s3", ({ request }) => handle(request), opts)
    .post("/s3", ({ request }) => handle(request), opts)
    .delete("/s3", ({ request }) => handle(request), opts)
    .get("/s3/*", ({ request }) => handle(request), opts)
    .put("/s3/*", ({ request }) => handle(request), opts)
    .post("/s3/*", ({ request }) => handle(request), opts)
    .delete("/s3/*", ({ request }) => handle(request), opts);
}

/** Parameters only an object listing takes (ListBuckets takes `prefix`, `continuation-token`, `max-buckets` at most). */
const LISTING_ONLY = ["list-type", "delimiter", "marker", "max-keys", "encoding-type", "start-after", "fetch-owner"];

/**
 * A listing sent to the service root is a client addressing the bucket in the host name
 * (virtual-hosted style: `kura.example.com/s3/?list-type=2`). Answered with the bucket list, it read
 * as an empty bucket, and `rclone sync` from it deleted the whole destination. Kura takes the bucket
 * from the path only (a host such as `kura.example.com` may just be the server's own name), so the
 * listing is refused with what to change.
 */
function refuseBucketInHost(query: Map<string, string>): void {
  if (!LISTING_ONLY.some((name) => query.has(name))) return;
  throw new S3Error(
    "InvalidRequest",
    "对象列表请求没有给出存储桶：Kura 的 S3 接口只支持路径风格地址（/s3/kura/…），请在客户端启用 path style（rclone: force_path_style = true；AWS SDK: forcePathStyle: true；PicGo: pathStyleAccess）",
  );
}
