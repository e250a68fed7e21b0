/**
 * Which operation an `/s3/` request reaches, in-process through the router's own `handle`: method,
 * path and query shape (including what rclone, the AWS SDK and PicGo send, shared/s3/README.md), the
 * exact S3 error code, status and text of every refusal, browser-form uploads, and methods S3 has no
 * operation for. Bench: helpers/s3-rules.ts.
 */
import { describe, expect, test } from "bun:test";
import { folderByKey } from "../../src/s3/folders";
import { hasChinese } from "../fuzz/fuzz-support";
import { app, call, clearKeys, EMPTY_MD5, MD5, ORIGIN, routes, send, storeKeys, tag, useS3RuleContext, userId } from "../helpers/s3-rules";

useS3RuleContext();

/** Every sub-resource S3 knows; the router serves only some of them. */
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

describe("which operation a request reaches", () => {
  test("DeleteBucket: 204 on an empty library, 409 BucketNotEmpty once it holds an object", async () => {
    clearKeys();
    expect((await call("DELETE", "/s3/kura")).outcome).toBe("204 -");
    storeKeys(["keep.jpg"]);
    expect((await call("DELETE", "/s3/kura/")).outcome).toBe("409 BucketNotEmpty");
    clearKeys();
  });

  const shapes: [rule: string, method: string, target: string, outcome: string, headers?: Record<string, string>][] = [
    // The service.
    ["ListBuckets (rclone lsf r:)", "GET", "/s3/", "200 ListAllMyBucketsResult"],
    ["ListBuckets without the slash", "GET", "/s3", "200 ListAllMyBucketsResult"],
    ["ListBuckets (SDK, x-id)", "GET", "/s3/?x-id=ListBuckets", "200 ListAllMyBucketsResult"],
    ["ListBuckets takes prefix", "GET", "/s3/?prefix=k", "200 ListAllMyBucketsResult"],
    ["ListBuckets takes continuation-token and max-buckets", "GET", "/s3/?continuation-token=x&max-buckets=5", "200 ListAllMyBucketsResult"],
    ["HEAD on the service", "HEAD", "/s3/", "200 -"],
    ["PUT on the service", "PUT", "/s3/", "501 NotImplemented"],
    ["PUT on the service without the slash", "PUT", "/s3", "501 NotImplemented"],
    ["POST on the service", "POST", "/s3/", "501 NotImplemented"],
    ["POST on the service without the slash", "POST", "/s3", "501 NotImplemented"],
    ["DELETE on the service", "DELETE", "/s3/", "501 NotImplemented"],
    ["DELETE on the service without the slash", "DELETE", "/s3", "501 NotImplemented"],
    // Buckets.
    ["ListObjects v1 (rclone copy)", "GET", "/s3/kura?delimiter=%2F&max-keys=1000&prefix=dir%2F", "200 ListBucketResult"],
    ["ListObjects v1 with an empty delimiter (rclone lsf -R)", "GET", "/s3/kura?delimiter=&max-keys=1000&prefix=", "200 ListBucketResult"],
    [
      "ListObjectsV2 (rclone v2 + url encoding)",
      "GET",
      "/s3/kura?delimiter=%2F&encoding-type=url&list-type=2&max-keys=1000&prefix=dir%2F",
      "200 ListBucketResult/V2",
    ],
    ["ListObjectsV2 (SDK, trailing slash)", "GET", "/s3/kura/?delimiter=%2F&list-type=2&prefix=", "200 ListBucketResult/V2"],
    ["list-type=1 is v1", "GET", "/s3/kura?list-type=1", "200 ListBucketResult"],
    ["any list-type but 2 is v1", "GET", "/s3/kura?list-type=3", "200 ListBucketResult"],
    ["a bare GET of the bucket is v1", "GET", "/s3/kura", "200 ListBucketResult"],
    ["GetBucketVersioning (rclone purge)", "GET", "/s3/kura?versioning=", "200 VersioningConfiguration"],
    ["GetBucketVersioning, bare parameter", "GET", "/s3/kura/?versioning", "200 VersioningConfiguration"],
    ["GetBucketLocation", "GET", "/s3/kura?location", "200 LocationConstraint"],
    ["ListMultipartUploads", "GET", "/s3/kura?uploads", "200 ListMultipartUploadsResult"],
    ["ListObjectVersions is not offered", "GET", "/s3/kura?versions", "501 NotImplemented"],
    ["HeadBucket (rclone)", "HEAD", "/s3/kura", "200 -"],
    ["HeadBucket (SDK, trailing slash)", "HEAD", "/s3/kura/", "200 -"],
    ["HEAD of a bucket sub-resource", "HEAD", "/s3/kura?acl", "501 -"],
    ["CreateBucket (rclone, x-amz-acl)", "PUT", "/s3/kura", "200 -", { "x-amz-acl": "private" }],
    ["PutBucketVersioning is not offered", "PUT", "/s3/kura?versioning", "501 NotImplemented"],
    ["DeleteBucketPolicy is not offered", "DELETE", "/s3/kura?policy", "501 NotImplemented"],
    ["DeleteObjects (SDK) reads its XML body", "POST", "/s3/kura/?delete=", "400 MalformedXML"],
    ["POST ?uploads on a bucket is not offered", "POST", "/s3/kura?uploads", "501 NotImplemented"],
    ["a bare POST on a bucket (signed) is not offered", "POST", "/s3/kura", "501 NotImplemented"],
    // Any other bucket name.
    ["another bucket: listing", "GET", "/s3/photos?list-type=2", "404 NoSuchBucket"],
    ["another bucket: CreateBucket (rclone r:photos)", "PUT", "/s3/photos", "404 NoSuchBucket"],
    ["another bucket: PutObject (PicGo bucketName)", "PUT", "/s3/images/2026/a.jpg?x-id=PutObject", "404 NoSuchBucket"],
    ["another bucket: HEAD", "HEAD", "/s3/photos/a.jpg", "404 -"],
    ["a bucket name differing in case", "GET", "/s3/Kura", "404 NoSuchBucket"],
    ["the bucket may be percent-encoded", "GET", "/s3/%6Bura", "200 ListBucketResult"],
    // Objects.
    ["GetObject (SDK x-id)", "GET", "/s3/kura/missing.jpg?x-id=GetObject", "404 NoSuchKey"],
    ["GetObject of one part", "GET", "/s3/kura/missing.jpg?partNumber=1", "404 NoSuchKey"],
    ["HeadObject", "HEAD", "/s3/kura/missing.jpg", "404 -"],
    ["HeadObject of one part", "HEAD", "/s3/kura/missing.jpg?partNumber=1", "404 -"],
    ["HEAD with an uploadId is not an operation", "HEAD", "/s3/kura/missing.jpg?uploadId=abc", "501 -"],
    ["ListParts of an unknown upload", "GET", "/s3/kura/missing.jpg?uploadId=abc", "404 NoSuchUpload"],
    ["ListParts wins over partNumber", "GET", "/s3/kura/missing.jpg?partNumber=1&uploadId=abc", "404 NoSuchUpload"],
    ["PutObject of a folder marker", "PUT", "/s3/kura/new-folder/", "200 -"],
    ["PutObject with a sub-resource is not offered", "PUT", "/s3/kura/a.jpg?tagging", "501 NotImplemented"],
    ["CopyObject (SDK x-id)", "PUT", "/s3/kura/copy.jpg?x-id=CopyObject", "404 NoSuchKey", { "x-amz-copy-source": "kura/missing.jpg" }],
    ["CopyObject with a sub-resource is not offered", "PUT", "/s3/kura/copy.jpg?acl", "501 NotImplemented", { "x-amz-copy-source": "kura/missing.jpg" }],
    ["UploadPart (rclone)", "PUT", "/s3/kura/a.jpg?partNumber=1&uploadId=abc", "404 NoSuchUpload"],
    ["UploadPart (SDK x-id)", "PUT", "/s3/kura/a.jpg?partNumber=1&uploadId=abc&x-id=UploadPart", "404 NoSuchUpload"],
    ["UploadPart with only an uploadId", "PUT", "/s3/kura/a.jpg?uploadId=abc", "404 NoSuchUpload"],
    ["UploadPart with only a partNumber", "PUT", "/s3/kura/a.jpg?partNumber=1", "404 NoSuchUpload"],
    ["UploadPartCopy is not offered", "PUT", "/s3/kura/a.jpg?partNumber=1&uploadId=abc", "501 NotImplemented", { "x-amz-copy-source": "kura/b.jpg" }],
    ["UploadPartCopy with only an uploadId", "PUT", "/s3/kura/a.jpg?uploadId=abc", "501 NotImplemented", { "x-amz-copy-source": "kura/b.jpg" }],
    ["CreateMultipartUpload (rclone uploads=)", "POST", "/s3/kura/mp/a.jpg?uploads=", "200 InitiateMultipartUploadResult"],
    ["CompleteMultipartUpload of an unknown upload", "POST", "/s3/kura/a.jpg?uploadId=abc", "404 NoSuchUpload"],
    ["a bare POST on an object is not offered", "POST", "/s3/kura/a.jpg", "501 NotImplemented"],
    ["RestoreObject is not offered", "POST", "/s3/kura/a.jpg?restore", "501 NotImplemented"],
    ["AbortMultipartUpload (SDK x-id)", "DELETE", "/s3/kura/a.jpg?uploadId=abc&x-id=AbortMultipartUpload", "404 NoSuchUpload"],
    ["DeleteObject (SDK x-id), absent key", "DELETE", "/s3/kura/missing.jpg?x-id=DeleteObject", "204 -"],
    ["DeleteObjectTagging is not offered", "DELETE", "/s3/kura/a.jpg?tagging", "501 NotImplemented"],
    // versionId: the one version is `null`.
    ["versionId=null reads the live object", "GET", "/s3/kura/missing.jpg?versionId=null", "404 NoSuchKey"],
    ["versionId=null deletes the live object", "DELETE", "/s3/kura/missing.jpg?versionId=null", "204 -"],
    ["another versionId on GET", "GET", "/s3/kura/missing.jpg?versionId=3HL4kqtJlcpXroDTDmJ", "400 InvalidArgument"],
    ["another versionId on HEAD", "HEAD", "/s3/kura/missing.jpg?versionId=abc", "400 -"],
    ["another versionId on DELETE", "DELETE", "/s3/kura/missing.jpg?versionId=abc", "400 InvalidArgument"],
    ["an empty versionId", "GET", "/s3/kura/missing.jpg?versionId=", "400 InvalidArgument"],
    ["versionId on PUT", "PUT", "/s3/kura/a.jpg?versionId=NULL", "400 InvalidArgument"],
    // Keys the path cannot carry.
    ["an invalid escape in the key", "GET", "/s3/kura/%zz.jpg", "400 InvalidURI"],
    ["an invalid escape in the bucket", "GET", "/s3/k%ura", "400 InvalidURI"],
    ["an escaped slash cannot smuggle in a parent segment: no such object", "GET", "/s3/kura/x/%2E%2E%2Fa.jpg", "404 NoSuchKey"],
    ["nor be written", "PUT", "/s3/kura/x/..%2Fa.jpg", "400 InvalidArgument"],
    ["PutObject of a key with an empty segment", "PUT", "/s3/kura/a//b.jpg", "400 InvalidArgument"],
    ["PutObject of a key with a backslash", "PUT", "/s3/kura/a%5Cb.jpg", "400 InvalidArgument"],
    // A listing sent to the service root names its bucket in the host name (virtual-hosted style).
    ...["list-type=2", "delimiter=%2F", "marker=a", "max-keys=10", "encoding-type=url", "start-after=a", "fetch-owner=true"].map(
      (q): [string, string, string, string] => [`virtual-hosted listing (${q})`, "GET", `/s3/?${q}`, "400 InvalidRequest"],
    ),
    ["a virtual-hosted listing's HEAD", "HEAD", "/s3/?list-type=2", "400 -"],
  ];
  test.each(shapes)("%s: %s %s → %s", async (_rule, method, target, outcome, headers) => {
    const a = await call(method, target, { headers });
    expect(a.outcome).toBe(outcome);
    if (a.status >= 400 && method !== "HEAD") {
      expect(hasChinese(tag(a.xml, "Message") ?? "")).toBe(true);
      expect(tag(a.xml, "Resource")).toBe(new URL(`${ORIGIN}${target}`).pathname);
    }
  });

  test("the answers that have no body say which operation ran by their headers", async () => {
    const head = await call("HEAD", "/s3/kura");
    expect(head.headers.get("x-amz-bucket-region")).toBe("us-east-1");
    const create = await call("PUT", "/s3/kura");
    expect(create.headers.get("location")).toBe("/kura");
    const folder = await call("PUT", "/s3/kura/photos/");
    expect(folder.headers.get("etag")).toBe(`"${EMPTY_MD5}"`);
    expect(folderByKey(app, userId, "photos/")?.object_key).toBe("photos/");
    const service = await call("HEAD", "/s3");
    expect(service.headers.get("x-amz-bucket-region")).toBeNull();
  });

  test("a folder marker's body must be empty; the body reaches the handler unparsed whatever its type", async () => {
    const a = await call("PUT", "/s3/kura/json-folder/", { body: '{"a":1}', headers: { "content-type": "application/json" } });
    expect(a.outcome).toBe("400 InvalidArgument");
    const form = await call("PUT", "/s3/kura/form-folder/", { body: "a=1", headers: { "content-type": "application/x-www-form-urlencoded" } });
    expect(form.outcome).toBe("400 InvalidArgument");
  });

  test("every sub-resource the router does not serve is 501 NotImplemented, on the bucket and on an object, never a plain GET or PUT", async () => {
    const servedOnBucket: Record<string, string> = {
      location: "200 LocationConstraint",
      uploads: "200 ListMultipartUploadsResult",
      versioning: "200 VersioningConfiguration",
    };
    const servedOnObject: Record<string, string> = { partNumber: "404 NoSuchKey", uploadId: "404 NoSuchUpload" };
    const seen: string[] = [];
    for (const name of SUBRESOURCES) {
      seen.push(`${name}: GET bucket ${(await call("GET", `/s3/kura?${name}`)).outcome}`);
      seen.push(`${name}: GET object ${(await call("GET", `/s3/kura/missing.jpg?${name}=`)).outcome}`);
      seen.push(`${name}: PUT bucket ${(await call("PUT", `/s3/kura?${name}`)).outcome}`);
    }
    const expected = SUBRESOURCES.flatMap((name) => [
      `${name}: GET bucket ${servedOnBucket[name] ?? "501 NotImplemented"}`,
      `${name}: GET object ${servedOnObject[name] ?? "501 NotImplemented"}`,
      `${name}: PUT bucket 501 NotImplemented`,
    ]);
    expect(seen).toEqual(expected);
  });

  test("the 501 names the method, the level and the sub-resource", async () => {
    expect(tag((await call("GET", "/s3/kura?acl")).xml, "Message")).toContain("GET 存储桶 ?acl");
    expect(tag((await call("POST", "/s3/kura")).xml, "Message")).toMatch(/POST 存储桶$/);
    expect(tag((await call("GET", "/s3/kura/a.jpg?tagging")).xml, "Message")).toContain("GET 对象 ?tagging");
    const copying = { headers: { "x-amz-copy-source": "kura/b.jpg" } };
    // UploadPartCopy says what it is; a copy source on another operation does not make it one.
    expect(tag((await call("PUT", "/s3/kura/a.jpg?uploadId=x", copying)).xml, "Message")).toMatch(/PUT 对象 \?uploadId（复制分片 UploadPartCopy）$/);
    expect(tag((await call("PUT", "/s3/kura/a.jpg?partNumber=1&uploadId=x", copying)).xml, "Message")).toMatch(
      /PUT 对象 \?partNumber（复制分片 UploadPartCopy）$/,
    );
    expect(tag((await call("POST", "/s3/kura/a.jpg?partNumber=1", copying)).xml, "Message")).toMatch(/POST 对象 \?partNumber$/);
    expect(tag((await call("POST", "/s3/kura/a.jpg", copying)).xml, "Message")).toMatch(/POST 对象$/);
    expect(tag((await call("PUT", "/s3/kura/a.jpg?tagging", copying)).xml, "Message")).toMatch(/PUT 对象 \?tagging$/);
    expect(tag((await call("POST", "/s3/kura/a.jpg")).xml, "Message")).toMatch(/POST 对象$/);
    expect(tag((await call("DELETE", "/s3/")).xml, "Message")).toContain("DELETE /s3/");
  });

  test("a multipart upload's id picks the operation: ListParts, UploadPart, Complete, Abort", async () => {
    const created = await call("POST", "/s3/kura/mp/b.jpg?uploads");
    expect(created.outcome).toBe("200 InitiateMultipartUploadResult");
    const id = tag(created.xml, "UploadId")!;
    expect(tag(created.xml, "Key")).toBe("mp/b.jpg");
    expect(tag(created.xml, "Bucket")).toBe("kura");
    expect((await call("GET", `/s3/kura/mp/b.jpg?uploadId=${id}`)).outcome).toBe("200 ListPartsResult");
    expect((await call("GET", `/s3/kura/mp/other.jpg?uploadId=${id}`)).outcome).toBe("404 NoSuchUpload");
    expect((await call("PUT", `/s3/kura/mp/b.jpg?partNumber=0&uploadId=${id}`)).outcome).toBe("400 InvalidArgument");
    expect((await call("PUT", `/s3/kura/mp/b.jpg?partNumber=10001&uploadId=${id}`)).outcome).toBe("400 InvalidArgument");
    expect((await call("POST", `/s3/kura/mp/b.jpg?uploadId=${id}`)).outcome).toBe("400 MalformedXML");
    // A part passes the upload gate like any upload.
    const part = await call("PUT", `/s3/kura/mp/b.jpg?partNumber=1&uploadId=${id}`, { body: "hello" });
    expect([part.outcome, part.headers.get("etag")]).toEqual(["200 -", '"5d41402abc4b2a76b9719d911017c592"']);
    expect((await call("DELETE", `/s3/kura/mp/b.jpg?uploadId=${id}`)).outcome).toBe("204 -");
    expect((await call("GET", `/s3/kura/mp/b.jpg?uploadId=${id}`)).outcome).toBe("404 NoSuchUpload");
  });

  test("an existing object: HEAD and a part 1 read it, versionId=null too, part 2 is 416 InvalidPartNumber", async () => {
    storeKeys(["there.jpg"]);
    try {
      const head = await call("HEAD", "/s3/kura/there.jpg");
      expect([head.status, head.headers.get("etag")]).toEqual([200, `"${MD5}"`]);
      expect((await call("HEAD", "/s3/kura/there.jpg?versionId=null")).outcome).toBe("200 -");
      expect((await call("HEAD", "/s3/kura/there.jpg?partNumber=1")).outcome).toBe("206 -");
      expect((await call("GET", "/s3/kura/there.jpg?partNumber=2")).outcome).toBe("416 InvalidPartNumber");
      expect((await call("GET", "/s3/kura/there.jpg?partNumber=0")).outcome).toBe("400 InvalidArgument");
      expect((await call("DELETE", "/s3/kura/there.jpg")).outcome).toBe("204 -");
      expect((await call("HEAD", "/s3/kura/there.jpg")).outcome).toBe("404 -");
    } finally {
      clearKeys();
    }
  });

  test("every answer carries its x-amz-request-id, the error's RequestId", async () => {
    const ok = await call("GET", "/s3/");
    expect(ok.headers.get("x-amz-request-id")).toMatch(/^[0-9A-F]{16}$/);
    const err = await call("GET", "/s3/kura/missing.jpg");
    expect(err.headers.get("x-amz-request-id")).toMatch(/^[0-9A-F]{16}$/);
    expect(tag(err.xml, "RequestId")).toBe(err.headers.get("x-amz-request-id")!);
    expect(err.headers.get("content-type")).toBe("application/xml");
  });

  test("the access key names the token: an unknown one is 403 InvalidAccessKeyId", async () => {
    expect((await call("GET", "/s3/", { key: "kura_aaaaaaaaaaaa" })).outcome).toBe("403 InvalidAccessKeyId");
    expect((await call("GET", "/s3/kura/a.jpg", { key: "AKIDEXAMPLE12345" })).outcome).toBe("403 InvalidAccessKeyId");
  });

  test("a signature over the path without the /s3 mount is accepted (a proxy mapped a host's root onto it); any other path is not", async () => {
    expect((await call("GET", "/s3/kura/missing.jpg", { signPath: "/kura/missing.jpg" })).outcome).toBe("404 NoSuchKey");
    expect((await call("GET", "/s3/kura/missing.jpg", { signPath: "/x/kura/missing.jpg" })).outcome).toBe("403 SignatureDoesNotMatch");
  });

  test("an unsigned request is refused before any routing", async () => {
    const a = await send(new Request(`${ORIGIN}/s3/kura?list-type=2`));
    expect(a.outcome).toBe("403 AccessDenied");
  });
});

describe("browser-form uploads (POST Object, signed by their policy fields)", () => {
  const form = (target: string, headers: Record<string, string> = {}) =>
    new Request(`${ORIGIN}${target}`, { method: "POST", headers: { "content-type": "multipart/form-data; boundary=b", ...headers }, body: "--b--\r\n" });
  const cases: [rule: string, target: string, outcome: string, headers?: Record<string, string>][] = [
    ["to another bucket", "/s3/photos", "404 NoSuchBucket"],
    ["to an object address", "/s3/kura/a.jpg", "501 NotImplemented"],
    ["to the service root", "/s3/", "501 NotImplemented"],
    ["to the service root without the slash", "/s3", "501 NotImplemented"],
  ];
  test.each(cases)("%s: %s → %s", async (_rule, target, outcome, headers) => {
    const a = await send(form(target, headers));
    expect(a.outcome).toBe(outcome);
    expect(hasChinese(tag(a.xml, "Message") ?? "")).toBe(true);
    if (outcome === "501 NotImplemented") expect(tag(a.xml, "Message")).toBe("Kura 的 S3 接口不支持该操作：POST 表单上传只能提交到存储桶地址（/s3/kura）");
  });

  test("to the bucket the form is read (an empty form lacks its policy fields), not routed as a signed request", async () => {
    const a = await send(form("/s3/kura"));
    expect(a.outcome).toBe("400 InvalidArgument");
    expect(hasChinese(tag(a.xml, "Message") ?? "")).toBe(true);
    // Content-Type case does not matter.
    expect((await send(form("/s3/kura/a.jpg", { "content-type": "Multipart/Form-Data; boundary=b" }))).outcome).toBe("501 NotImplemented");
  });

  test("a signed POST or a presigned one with a form body is a signed request, not a form", async () => {
    expect((await call("POST", "/s3/kura/a.jpg", { headers: { "content-type": "multipart/form-data; boundary=b" }, body: "--b--\r\n" })).outcome).toBe(
      "501 NotImplemented",
    );
    const presigned = await send(form("/s3/kura/a.jpg?X-Amz-Algorithm=AWS4-HMAC-SHA256"));
    expect(presigned.outcome).toBe("400 AuthorizationQueryParametersError");
  });
});

describe("methods S3 has no operation for", () => {
  const cases: [rule: string, method: string, target: string, code: string, resourceType: string, headers?: Record<string, string>][] = [
    ["PATCH on the service", "PATCH", "/s3", "MethodNotAllowed", "SERVICE"],
    ["PATCH on the service root", "PATCH", "/s3/", "MethodNotAllowed", "SERVICE"],
    ["PROPFIND on a bucket", "PROPFIND", "/s3/kura", "MethodNotAllowed", "BUCKET"],
    ["MKCOL on a bucket with a trailing slash", "MKCOL", "/s3/kura/", "MethodNotAllowed", "BUCKET"],
    ["LOCK on an object", "LOCK", "/s3/kura/a.jpg", "MethodNotAllowed", "OBJECT"],
    ["PATCH on a folder", "PATCH", "/s3/kura/dir/", "MethodNotAllowed", "OBJECT"],
    ["an empty bucket segment followed by a name", "PATCH", "/s3//x", "MethodNotAllowed", "OBJECT"],
    [
      "a CORS preflight on an object",
      "OPTIONS",
      "/s3/kura/a.jpg",
      "AccessForbidden",
      "OBJECT",
      { origin: "https://x.example", "access-control-request-method": "PUT" },
    ],
    [
      "a CORS preflight on the service",
      "OPTIONS",
      "/s3/",
      "AccessForbidden",
      "SERVICE",
      { origin: "https://x.example", "access-control-request-method": "GET" },
    ],
  ];
  test.each(cases)("%s: %s %s → %s (%s)", async (_rule, method, target, code, resourceType, headers) => {
    const a = await send(new Request(`${ORIGIN}${target}`, { method, headers }));
    const status = code === "MethodNotAllowed" ? 405 : 403;
    expect([a.outcome, tag(a.xml, "ResourceType"), tag(a.xml, "Resource")]).toEqual([`${status} ${code}`, resourceType, target]);
    expect(tag(a.xml, "Method")).toBe(method === "OPTIONS" ? headers!["access-control-request-method"] : method);
    expect(tag(a.xml, "RequestId")).toMatch(/^[0-9A-F]{16}$/);
    expect(a.headers.get("x-amz-request-id")).toBe(tag(a.xml, "RequestId")!);
    expect(hasChinese(tag(a.xml, "Message")!)).toBe(true);
    expect(a.headers.get("allow")).toBe(code === "MethodNotAllowed" ? "GET, HEAD, PUT, POST, DELETE" : null);
  });

  const preflights: [rule: string, headers: Record<string, string>][] = [
    ["without Origin", { "access-control-request-method": "PUT" }],
    ["without Access-Control-Request-Method", { origin: "https://x.example" }],
    ["asking for a method S3 has no operation for", { origin: "https://x.example", "access-control-request-method": "PATCH" }],
    ["asking for OPTIONS itself", { origin: "https://x.example", "access-control-request-method": "OPTIONS" }],
  ];
  test.each(preflights)("a preflight %s is 400 BadRequest", async (_rule, headers) => {
    const a = await send(new Request(`${ORIGIN}/s3/kura/a.jpg`, { method: "OPTIONS", headers }));
    expect(a.outcome).toBe("400 BadRequest");
    expect(hasChinese(tag(a.xml, "Message")!)).toBe(true);
  });

  test("the 400 says which header is wrong", async () => {
    const noMethod = await send(new Request(`${ORIGIN}/s3/kura`, { method: "OPTIONS", headers: { origin: "https://x.example" } }));
    expect(tag(noMethod.xml, "Message")).toContain("（缺失）");
    const bad = await send(
      new Request(`${ORIGIN}/s3/kura`, { method: "OPTIONS", headers: { origin: "https://x.example", "access-control-request-method": "PATCH" } }),
    );
    expect(tag(bad.xml, "Message")).toContain("PATCH");
  });

  test("paths outside /s3 are not answered as S3", async () => {
    for (const target of ["/s3x", "/s3kura/a.jpg", "/api/x"]) {
      const res = await routes.handle(new Request(`${ORIGIN}${target}`, { method: "PATCH" }));
      expect([target, res.status, res.headers.get("allow")]).toEqual([target, 404, null]);
    }
  });

  test("the methods S3 has reach the operations, not this refusal", async () => {
    for (const method of ["GET", "HEAD", "PUT", "POST", "DELETE"]) {
      const res = await routes.handle(new Request(`${ORIGIN}/s3/kura/a.jpg`, { method }));
      expect([method, res.status]).toEqual([method, 403]);
    }
  });
});
