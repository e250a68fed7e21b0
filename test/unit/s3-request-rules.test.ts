/**
 * How an `/s3/` request is read and dispatched, rule by rule, in-process (the router's own Elysia
 * `handle`, no server): bucket and key from the raw path (per-segment percent-decoding, `%2F`, `+`,
 * `//`, trailing `/`, non-ASCII, invalid escapes), the query (first value wins, `+` is a space), the
 * operation each method + path + query shape reaches (including what rclone, the AWS SDK and PicGo
 * send, shared/s3/README.md), the exact S3 error code and status of every refusal, the listing
 * parameters at and past their bounds, the write conditions' header forms, and folder keys.
 * Requests are signed here with the canonical URI = the raw path, as real clients sign it.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import fc from "fast-check";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { s3SecretFor, TokenRepo } from "../../src/auth/tokens";
import type { AppContext } from "../../src/context";
import { uploadIdleMs } from "../../src/http/idle-limits";
import { S3Error } from "../../src/s3/errors";
import { deleteFolder, folderByKey, isFolderKey, isFolderObject, putFolder } from "../../src/s3/folders";
import type { S3Object } from "../../src/s3/object";
import { isCommonPrefix } from "../../src/s3/ops/list";
import {
  authenticateS3,
  keyBytes,
  MAX_KEY_BYTES,
  nameEncoder,
  objectUrl,
  pageSizeOf,
  partNumberOf,
  requestMeta,
  splitS3Path,
  validObjectKey,
  type S3Request,
} from "../../src/s3/request";
import { s3Routes } from "../../src/s3/router";
import { canonicalQuery, deriveSigningKey, formatAmzDate, hmac, parseQuery, sha256Hex } from "../../src/s3/sigv4-canonical";
import { etagList, keyUnchanged, writeExpectation } from "../../src/s3/write-conditions";
import { rawTarget } from "../../src/shared/url-target";
import { hasChinese } from "../fuzz/fuzz-support";
import { openContext } from "../helpers/context";

const ORIGIN = "http://kura.test";
const EMPTY_MD5 = "d41d8cd98f00b204e9800998ecf8427e";
const MD5 = "0123456789abcdef0123456789abcdef";

let dir: string;
let ctx: Awaited<ReturnType<typeof openContext>>;
let app: AppContext;
let routes: ReturnType<typeof s3Routes>;
let userId: string;
let tokenId: number;
let accessKey: string;
let secret: string;
let blobId: number;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "kura-s3-request-rules-"));
  ctx = await openContext(dir);
  app = ctx.app;
  userId = app.db.query<{ id: string }, []>("SELECT id FROM users ORDER BY created_at LIMIT 1").get()!.id;
  const repo = new TokenRepo(app.db);
  const issued = repo.issue(userId, "s3-request-rules", 0);
  tokenId = issued.id;
  accessKey = issued.prefix;
  secret = s3SecretFor(app.key, repo.byId(issued.id)!);
  routes = s3Routes(app);
  blobId = Number(
    app.db
      .query(
        `INSERT INTO blobs (sha256, storage_key, mime, size, width, height, ref_count, created_at, md5) VALUES ('s', 'k', 'image/png', 1, 1, 1, 1, '2025-01-01 00:00:00', '${MD5}')`,
      )
      .run().lastInsertRowid,
  );
});
afterAll(() => {
  ctx.close();
  rmSync(dir, { recursive: true, force: true });
});

/** Stores image objects under `keys` for the token's user (no bytes: HEAD, listings and conditions never read them). */
function storeKeys(keys: string[]) {
  const insert = app.db.query(
    "INSERT INTO images (id, blob_id, user_id, file_name, object_key, created_at) VALUES (?, ?, ?, 'x.png', ?, '2025-01-01 00:00:00')",
  );
  for (const key of keys) insert.run(`img-${key}`, blobId, userId, key);
}
function clearKeys() {
  app.db.exec("DELETE FROM images; DELETE FROM s3_folder_markers");
}

/** The request as a client sends it, SigV4-signed (header auth, UNSIGNED-PAYLOAD) over the raw path and query the URL parser kept. */
function signed(method: string, target: string, opts: { headers?: Record<string, string>; body?: string; key?: string; signPath?: string } = {}): Request {
  const url = new Request(`${ORIGIN}${target}`).url; // the URL parser's form: non-ASCII escaped, dot segments resolved
  const { path, query } = rawTarget(url);
  const amzDate = formatAmzDate(Date.now());
  const headers: Record<string, string> = { host: "kura.test", "x-amz-date": amzDate, "x-amz-content-sha256": "UNSIGNED-PAYLOAD" };
  for (const [name, value] of Object.entries(opts.headers ?? {})) headers[name.toLowerCase()] = value;
  const names = Object.keys(headers).sort();
  const canonical = [
    method,
    opts.signPath ?? path,
    canonicalQuery(parseQuery(query)),
    names.map((n) => `${n}:${headers[n]!.trim()}\n`).join(""),
    names.join(";"),
    "UNSIGNED-PAYLOAD",
  ].join("\n");
  const scope = `${amzDate.slice(0, 8)}/us-east-1/s3/aws4_request`;
  const signature = hmac(
    deriveSigningKey(secret, amzDate.slice(0, 8), "us-east-1", "s3"),
    ["AWS4-HMAC-SHA256", amzDate, scope, sha256Hex(canonical)].join("\n"),
  ).toString("hex");
  headers.authorization = `AWS4-HMAC-SHA256 Credential=${opts.key ?? accessKey}/${scope}, SignedHeaders=${names.join(";")}, Signature=${signature}`;
  return new Request(url, { method, headers, body: opts.body });
}

interface Answer {
  status: number;
  /** `<status> <error code | root element>`, `/V2` added to a ListObjectsV2 result, `-` for no body. */
  outcome: string;
  xml: string;
  headers: Headers;
}
async function answer(res: Response): Promise<Answer> {
  const xml = await res.text();
  const code = /<Code>([^<]*)<\/Code>/.exec(xml)?.[1];
  const root = /^(?:<\?xml[^>]*\?>)?\s*<([A-Za-z]+)/.exec(xml)?.[1];
  const label = code ?? (root ? `${root}${xml.includes("<KeyCount>") ? "/V2" : ""}` : "-");
  return { status: res.status, outcome: `${res.status} ${label}`, xml, headers: res.headers };
}
const send = async (request: Request) => answer(await routes.handle(request));
const call = (method: string, target: string, opts: Parameters<typeof signed>[2] = {}) => send(signed(method, target, opts));
const tag = (xml: string, name: string) => new RegExp(`<${name}>([^<]*)</${name}>`).exec(xml)?.[1];
const tags = (xml: string, name: string) => [...xml.matchAll(new RegExp(`<${name}>([^<]*)</${name}>`, "g"))].map((m) => m[1]!);

/** An S3Error as `<status> <code>`, flagged when its message is not Chinese; anything else is rethrown. */
function errorLabel(err: unknown): string {
  if (!(err instanceof S3Error)) throw err;
  return `${err.status} ${err.code}${hasChinese(err.message) ? "" : " (message not Chinese)"}`;
}
/** The S3Error a call throws, or "ok". */
function refusal(fn: () => unknown): string {
  try {
    fn();
    return "ok";
  } catch (err) {
    return errorLabel(err);
  }
}

describe("bucket and key from the raw path (splitS3Path)", () => {
  const cases: [rule: string, path: string, bucket: string, key: string][] = [
    ["the service root", "/s3", "", ""],
    ["the service root with its slash", "/s3/", "", ""],
    ["a bucket (rclone, no trailing slash)", "/s3/kura", "kura", ""],
    ["a bucket with a trailing slash (the SDK) is still the bucket", "/s3/kura/", "kura", ""],
    ["a key", "/s3/kura/2026/a.jpg", "kura", "2026/a.jpg"],
    ["each segment is decoded: %20 is a space", "/s3/kura/a%20b.jpg", "kura", "a b.jpg"],
    ["+ in the path is a plus, never a space", "/s3/kura/a+b.jpg", "kura", "a+b.jpg"],
    ["%2B is a plus", "/s3/kura/a%2Bb.jpg", "kura", "a+b.jpg"],
    ["%2F inside a segment decodes to a slash in the key", "/s3/kura/a%2Fb.jpg", "kura", "a/b.jpg"],
    ["an encoded trailing slash makes a folder key", "/s3/kura/dir%2F", "kura", "dir/"],
    ["a trailing slash is kept in the key", "/s3/kura/dir/", "kura", "dir/"],
    ["a double slash after the bucket starts the key with a slash", "/s3/kura//a.jpg", "kura", "/a.jpg"],
    ["a double slash inside the key is kept", "/s3/kura/a//b.jpg", "kura", "a//b.jpg"],
    ["UTF-8 escapes decode to the characters", "/s3/kura/%E6%B5%8B%E8%AF%95%20%E5%9B%BE%E7%89%87%2B1.webp", "kura", "测试 图片+1.webp"],
    ["a four-byte character", "/s3/kura/%F0%9F%98%80.png", "kura", "😀.png"],
    ["characters a client left unescaped are taken as they are", "/s3/kura/a!'()*~.jpg", "kura", "a!'()*~.jpg"],
    ["%25 is a literal percent", "/s3/kura/100%25.jpg", "kura", "100%.jpg"],
    ["the bucket is decoded too", "/s3/%6Bura/a.jpg", "kura", "a.jpg"],
    ["only a whole `/s3` segment is the mount", "/s3kura/a.jpg", "s3kura", "a.jpg"],
    ["a path without the mount (restic) names the bucket first", "/kura/a.jpg", "kura", "a.jpg"],
    ["an `s3` segment further on is part of the key", "/kura/s3/a.jpg", "kura", "s3/a.jpg"],
    ["an empty bucket segment: the bucket is empty, the rest is the key", "/s3//kura/a.jpg", "", "kura/a.jpg"],
    ["encoded dot segments are decoded, not resolved (the key check refuses them)", "/s3/kura/%2E%2E/a.jpg", "kura", "../a.jpg"],
  ];
  test.each(cases)("%s: %s", (_rule, path, bucket, key) => {
    expect(splitS3Path(path)).toEqual({ bucket, key });
  });

  const invalid: [rule: string, path: string][] = [
    ["a % not followed by two hex digits", "/s3/kura/%zz.jpg"],
    ["a lone % at the end", "/s3/kura/a%"],
    ["a truncated UTF-8 sequence", "/s3/kura/%E4%B8.jpg"],
    ["an invalid UTF-8 byte", "/s3/kura/%FF.jpg"],
    ["an invalid escape in a later segment", "/s3/kura/a/b%G1"],
    ["an invalid escape in the bucket", "/s3/ku%ra/a.jpg"],
    ["an invalid escape in a bucket-only path", "/s3/%E4"],
  ];
  test.each(invalid)("%s is 400 InvalidURI: %s", (_rule, path) => {
    expect(refusal(() => splitS3Path(path))).toBe("400 InvalidURI");
  });
});

describe("object keys (validObjectKey, keyBytes, objectUrl)", () => {
  const cases: [rule: string, key: string, valid: boolean][] = [
    ["a plain key", "a.jpg", true],
    ["a key with folders", "2026/11/a.jpg", true],
    ["non-ASCII", "测试/图片.webp", true],
    ["a space and a plus", "a b+c.jpg", true],
    ["three dots are a name", ".../a", true],
    ["a leading dot is a name", ".hidden", true],
    ["a trailing double dot is a name", "a..", true],
    ["DEL's neighbour U+0080 is allowed", "a\u0080b", true],
    ["the empty key", "", false],
    ["a leading slash", "/a.jpg", false],
    ["an empty segment", "a//b.jpg", false],
    ["a trailing slash (an empty last segment)", "a/", false],
    ["a `.` segment", "a/./b.jpg", false],
    ["a `..` segment", "a/../b.jpg", false],
    ["only `.`", ".", false],
    ["only `..`", "..", false],
    ["a backslash", "a\\b.jpg", false],
    ["NUL", "a\u0000b", false],
    ["U+001F", "a\u001fb", false],
    ["a tab", "a\tb", false],
    ["DEL", "a\u007fb", false],
  ];
  test.each(cases)("%s: %j → %p", (_rule, key, valid) => {
    expect(validObjectKey(key)).toBe(valid);
  });

  test("a key's length is its UTF-8 bytes, limited to 1024", () => {
    expect(MAX_KEY_BYTES).toBe(1024);
    expect([keyBytes(""), keyBytes("a"), keyBytes("é"), keyBytes("中"), keyBytes("😀"), keyBytes("a中😀")]).toEqual([0, 1, 2, 3, 4, 8]);
  });

  test("objectUrl encodes each segment and keeps the slashes", () => {
    expect(objectUrl("https://h.example", "kura", "2026/a b+c/中.jpg")).toBe("https://h.example/s3/kura/2026/a%20b%2Bc/%E4%B8%AD.jpg");
    expect(objectUrl("https://h.example", "kura", "a%2F?#.jpg")).toBe("https://h.example/s3/kura/a%252F%3F%23.jpg");
  });
});

describe("query parameters read by the listings and parts", () => {
  const q = (entries: Record<string, string> = {}) => ({ query: new Map(Object.entries(entries)) });
  const sizes: [rule: string, raw: string | undefined, expected: number | string][] = [
    ["absent is 1000", undefined, 1000],
    ["empty is 1000", "", 1000],
    ["0 asks for nothing", "0", 0],
    ["1", "1", 1],
    ["999", "999", 999],
    ["1000 is the limit", "1000", 1000],
    ["1001 is cut to 1000", "1001", 1000],
    ["a huge number is cut to 1000", "99999999999999999999", 1000],
    ["leading zeros are decimal", "007", 7],
    ["a negative number", "-1", "400 InvalidArgument"],
    ["not a number", "abc", "400 InvalidArgument"],
    ["a fraction", "1.5", "400 InvalidArgument"],
    ["an exponent", "1e3", "400 InvalidArgument"],
    ["a plus sign", "+5", "400 InvalidArgument"],
    ["hex", "0x10", "400 InvalidArgument"],
    ["a leading blank", " 5", "400 InvalidArgument"],
    ["a trailing blank", "5 ", "400 InvalidArgument"],
  ];
  test.each(sizes)("max-keys %s: %p → %p", (_rule, raw, expected) => {
    const req = q(raw === undefined ? {} : { "max-keys": raw });
    const out = typeof expected === "number" ? pageSizeOf(req, "max-keys") : refusal(() => pageSizeOf(req, "max-keys"));
    expect(out).toBe(expected);
  });

  test("the refusal names the parameter it was given", () => {
    for (const name of ["max-keys", "max-uploads"]) {
      expect(() => pageSizeOf(q({ [name]: "x" }), name)).toThrow(name);
    }
    // Only the named parameter is read.
    expect(pageSizeOf(q({ "max-keys": "5" }), "max-uploads")).toBe(1000);
  });

  const encodings: [rule: string, type: string | undefined, expected: string][] = [
    ["absent leaves names alone", undefined, "a b/中%.jpg"],
    ["empty leaves names alone", "", "a b/中%.jpg"],
    ["url percent-encodes, slashes included", "url", "a%20b%2F%E4%B8%AD%25.jpg"],
    ["URL in capitals is refused", "URL", "400 InvalidArgument"],
    ["any other type is refused", "xml", "400 InvalidArgument"],
  ];
  test.each(encodings)("encoding-type %s", (_rule, type, expected) => {
    const req = q(type === undefined ? {} : { "encoding-type": type });
    const out = refusal(() => nameEncoder(req));
    expect(out === "ok" ? nameEncoder(req)("a b/中%.jpg") : out).toBe(expected);
  });

  const parts: [raw: string, expected: number | string][] = [
    ["1", 1],
    ["2", 2],
    ["9999", 9999],
    ["10000", 10000],
    ["00001", 1],
    ["0", "400 InvalidArgument"],
    ["10001", "400 InvalidArgument"],
    ["99999", "400 InvalidArgument"],
    ["000001", "400 InvalidArgument"],
    ["-1", "400 InvalidArgument"],
    ["", "400 InvalidArgument"],
    ["1.0", "400 InvalidArgument"],
    [" 1", "400 InvalidArgument"],
    ["1 ", "400 InvalidArgument"],
    ["a1", "400 InvalidArgument"],
  ];
  test.each(parts)("partNumber %p → %p", (raw, expected) => {
    expect(typeof expected === "number" ? partNumberOf(raw) : refusal(() => partNumberOf(raw))).toBe(expected);
  });

  test("requestMeta keeps x-amz-meta-* (lower-cased) and a non-empty Content-Type, nothing else", () => {
    const request = new Request(ORIGIN, {
      headers: {
        "X-Amz-Meta-Mtime": "1795384597.94142935",
        "x-amz-meta-md5chksum": "abc==",
        "x-amz-acl": "private",
        "content-type": "image/png",
        "x-meta-x": "1",
      },
    });
    expect(requestMeta(request)).toEqual({ "x-amz-meta-mtime": "1795384597.94142935", "x-amz-meta-md5chksum": "abc==", "content-type": "image/png" });
    expect(requestMeta(new Request(ORIGIN, { headers: { "content-type": "" } }))).toEqual({});
    expect(requestMeta(new Request(ORIGIN))).toEqual({});
  });
});

describe("authenticateS3: what a signed request reads as", () => {
  test("method, bucket, key, query (first value wins; + is a space in the query), principal, request id and idle deadline", () => {
    const request = signed("GET", "/s3/kura/dir/a+b%20c.jpg?prefix=a+b&prefix=second&delimiter=&marker=a%2Bb&x-id=GetObject&bare");
    const req = authenticateS3(app, request, "REQ123");
    expect({ method: req.method, bucket: req.bucket, key: req.key, requestId: req.requestId, request: req.request === request }).toEqual({
      method: "GET",
      bucket: "kura",
      key: "dir/a+b c.jpg",
      requestId: "REQ123",
      request: true,
    });
    expect([...req.query]).toEqual([
      ["prefix", "a b"],
      ["delimiter", ""],
      ["marker", "a+b"],
      ["x-id", "GetObject"],
      ["bare", ""],
    ]);
    expect([req.token.id, req.user.id, req.auth.accessKeyId]).toEqual([tokenId, userId, accessKey]);
    expect(req.idleMs).toBe(uploadIdleMs(app.settings.get().upload_idle_timeout_seconds));
    expect(req.idleMs).toBeGreaterThan(0);
  });

  test("every use is recorded on the token", () => {
    app.db.query("UPDATE tokens SET last_used_at = NULL WHERE id = ?").run(tokenId);
    authenticateS3(app, signed("GET", "/s3/kura"), "R");
    expect(new TokenRepo(app.db).byId(tokenId)!.last_used_at).not.toBeNull();
  });

  test("a token without the upload scope is 403 AccessDenied, on every route", async () => {
    const repo = new TokenRepo(app.db);
    const other = repo.issue(userId, "s3-no-scope", 0);
    app.db.query("UPDATE tokens SET scopes = 'read' WHERE id = ?").run(other.id);
    const otherSecret = s3SecretFor(app.key, repo.byId(other.id)!);
    const saved = secret;
    secret = otherSecret;
    try {
      expect(refusal(() => authenticateS3(app, signed("GET", "/s3/kura", { key: other.prefix }), "R"))).toBe("403 AccessDenied");
      expect((await call("GET", "/s3/", { key: other.prefix })).outcome).toBe("403 AccessDenied");
    } finally {
      secret = saved;
    }
  });
});

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

describe("listing parameters", () => {
  const KEYS = ["a.jpg", "b c.jpg", "dir/b.jpg", "dir/c.jpg", "dir/sub/d.jpg", "dir/sub/e.jpg", "e.jpg", "中.jpg"];
  beforeAll(() => {
    clearKeys();
    storeKeys(KEYS);
  });
  afterAll(clearKeys);

  interface Listed {
    outcome: string;
    keys: string[];
    prefixes: string[];
    fields: Record<string, string | undefined>;
  }
  const FIELDS = [
    "Name",
    "Prefix",
    "Marker",
    "MaxKeys",
    "Delimiter",
    "EncodingType",
    "IsTruncated",
    "NextMarker",
    "KeyCount",
    "ContinuationToken",
    "NextContinuationToken",
    "StartAfter",
  ];
  async function list(query: string): Promise<Listed> {
    const a = await call("GET", `/s3/kura?${query}`);
    if (a.status === 200) expect(a.xml).toContain('<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">');
    const fields: Record<string, string | undefined> = {};
    for (const name of FIELDS) if (tag(a.xml, name) !== undefined) fields[name] = tag(a.xml, name);
    return { outcome: a.outcome, keys: tags(a.xml, "Key"), prefixes: tags(a.xml, "Prefix").slice(1), fields };
  }
  const token = (text: string) => Buffer.from(text).toString("base64url");

  test("max-keys at and past its bounds (v1)", async () => {
    const zero = await list("max-keys=0");
    expect(zero).toEqual({
      outcome: "200 ListBucketResult",
      keys: [],
      prefixes: [],
      fields: { Name: "kura", Prefix: "", Marker: "", MaxKeys: "0", IsTruncated: "false" },
    });
    const one = await list("max-keys=1");
    expect([one.keys, one.fields.MaxKeys, one.fields.IsTruncated, one.fields.NextMarker]).toEqual([["a.jpg"], "1", "true", undefined]);
    for (const [raw, echoed] of [
      ["1000", "1000"],
      ["1001", "1000"],
      ["", "1000"],
    ]) {
      const page = await list(`max-keys=${raw}`);
      expect([raw, page.keys, page.fields.MaxKeys, page.fields.IsTruncated]).toEqual([raw, KEYS, echoed, "false"]);
    }
    const exact = await list(`max-keys=${KEYS.length}`);
    expect([exact.keys.length, exact.fields.IsTruncated]).toEqual([KEYS.length, "false"]);
    for (const raw of ["-1", "abc", "1.5", "%201"]) {
      expect([raw, (await list(`max-keys=${raw}`)).outcome]).toEqual([raw, "400 InvalidArgument"]);
      expect([raw, (await list(`list-type=2&max-keys=${raw}`)).outcome]).toEqual([raw, "400 InvalidArgument"]);
    }
  });

  test("max-keys at and past its bounds (v2): 0 is an empty page that is not truncated", async () => {
    const zero = await list("list-type=2&max-keys=0");
    expect(zero).toEqual({
      outcome: "200 ListBucketResult/V2",
      keys: [],
      prefixes: [],
      fields: { Name: "kura", Prefix: "", MaxKeys: "0", KeyCount: "0", IsTruncated: "false" },
    });
    const two = await list("list-type=2&max-keys=2");
    expect([two.keys, two.fields.KeyCount, two.fields.IsTruncated, two.fields.NextContinuationToken]).toEqual([
      ["a.jpg", "b c.jpg"],
      "2",
      "true",
      token("k:b c.jpg"),
    ]);
    const all = await list("list-type=2&max-keys=1001");
    expect([all.keys, all.fields.MaxKeys, all.fields.KeyCount, all.fields.NextContinuationToken]).toEqual([KEYS, "1000", String(KEYS.length), undefined]);
  });

  test("prefix and delimiter: CommonPrefixes, and the delimiter echoed only when given", async () => {
    const v1 = await list("prefix=dir%2F&delimiter=%2F");
    expect([v1.keys, v1.prefixes, v1.fields.Prefix, v1.fields.Delimiter]).toEqual([["dir/b.jpg", "dir/c.jpg"], ["dir/sub/"], "dir/", "/"]);
    const v2 = await list("list-type=2&prefix=dir%2F&delimiter=%2F");
    expect([v2.keys, v2.prefixes, v2.fields.KeyCount, v2.fields.Delimiter]).toEqual([["dir/b.jpg", "dir/c.jpg"], ["dir/sub/"], "3", "/"]);
    const flat = await list("prefix=dir%2F&delimiter=");
    expect([flat.keys, flat.prefixes, flat.fields.Delimiter]).toEqual([["dir/b.jpg", "dir/c.jpg", "dir/sub/d.jpg", "dir/sub/e.jpg"], [], undefined]);
    const v2flat = await list("list-type=2&prefix=dir%2Fsub");
    expect([v2flat.keys, v2flat.fields.Delimiter, v2flat.fields.Prefix]).toEqual([["dir/sub/d.jpg", "dir/sub/e.jpg"], undefined, "dir/sub"]);
    // `+` in the query is a space: the prefix `b c` finds `b c.jpg`.
    expect((await list("prefix=b+c")).keys).toEqual(["b c.jpg"]);
  });

  test("v1 marker: starts after it, skips a CommonPrefix marker's whole group, NextMarker only with a delimiter", async () => {
    expect((await list("marker=dir%2Fb.jpg")).keys).toEqual(["dir/c.jpg", "dir/sub/d.jpg", "dir/sub/e.jpg", "e.jpg", "中.jpg"]);
    expect((await list("marker=dir%2Fb.jpg")).fields.Marker).toBe("dir/b.jpg");
    // rclone --s3-list-chunk: the marker is the CommonPrefix `dir/`, whose keys were listed as that prefix.
    expect((await list("delimiter=%2F&marker=dir%2F")).keys).toEqual(["e.jpg", "中.jpg"]);
    // Without a delimiter `dir/` is only a key to start after.
    expect((await list("marker=dir%2F")).keys).toEqual(["dir/b.jpg", "dir/c.jpg", "dir/sub/d.jpg", "dir/sub/e.jpg", "e.jpg", "中.jpg"]);
    // Under a prefix, the marker `dir/sub/` is that listing's CommonPrefix.
    expect((await list("prefix=dir%2F&delimiter=%2F&marker=dir%2Fsub%2F")).keys).toEqual([]);
    // Without a delimiter nothing is a CommonPrefix, not even a marker equal to the prefix.
    expect((await list("prefix=dir&marker=dir")).keys).toEqual(["dir/b.jpg", "dir/c.jpg", "dir/sub/d.jpg", "dir/sub/e.jpg"]);
    // A marker equal to the prefix is no CommonPrefix: the keys under it follow.
    expect((await list("prefix=dir%2F&delimiter=%2F&marker=dir%2F")).keys).toEqual(["dir/b.jpg", "dir/c.jpg"]);
    // A marker before the prefix starts at the prefix; one past it leaves nothing.
    expect((await list("prefix=dir%2F&marker=a.jpg")).keys).toEqual(["dir/b.jpg", "dir/c.jpg", "dir/sub/d.jpg", "dir/sub/e.jpg"]);
    expect((await list("prefix=dir%2F&marker=e")).keys).toEqual([]);
    const paged = await list("delimiter=%2F&max-keys=3");
    expect([paged.keys, paged.prefixes, paged.fields.IsTruncated, paged.fields.NextMarker]).toEqual([["a.jpg", "b c.jpg"], ["dir/"], "true", "dir/"]);
    const byKey = await list("delimiter=%2F&max-keys=1");
    expect(byKey.fields.NextMarker).toBe("a.jpg");
    const last = await list("delimiter=%2F&max-keys=5");
    expect([last.fields.IsTruncated, last.fields.NextMarker]).toEqual(["false", undefined]);
  });

  test("v2: continuation-token goes on where the page ended; start-after is read like a marker; the token wins", async () => {
    const first = await list("list-type=2&delimiter=%2F&max-keys=3");
    expect([first.keys, first.prefixes, first.fields.NextContinuationToken, first.fields.ContinuationToken]).toEqual([
      ["a.jpg", "b c.jpg"],
      ["dir/"],
      token("p:dir/"),
      undefined,
    ]);
    const second = await list(`list-type=2&delimiter=%2F&max-keys=3&continuation-token=${first.fields.NextContinuationToken}`);
    expect([second.keys, second.fields.ContinuationToken, second.fields.IsTruncated]).toEqual([["e.jpg", "中.jpg"], token("p:dir/"), "false"]);
    // A key token starts after that key; the token wins over start-after.
    const byKey = await list(`list-type=2&continuation-token=${token("k:dir/sub/e.jpg")}&start-after=a.jpg`);
    expect([byKey.keys, byKey.fields.StartAfter]).toEqual([["e.jpg", "中.jpg"], "a.jpg"]);
    // A prefix token is a CommonPrefix even without a delimiter.
    expect((await list(`list-type=2&continuation-token=${token("p:dir/")}`)).keys).toEqual(["e.jpg", "中.jpg"]);
    // Nothing sorts after a prefix of only U+10FFFF: an empty page.
    const end = await list(`list-type=2&continuation-token=${token("p:\u{10FFFF}")}`);
    expect([end.keys, end.fields.IsTruncated]).toEqual([[], "false"]);
    expect((await list(`list-type=2&continuation-token=${token("k:")}`)).keys).toEqual(KEYS);
    expect((await list("list-type=2&start-after=dir%2Fc.jpg")).keys).toEqual(["dir/sub/d.jpg", "dir/sub/e.jpg", "e.jpg", "中.jpg"]);
    expect((await list("list-type=2&delimiter=%2F&start-after=dir%2F")).keys).toEqual(["e.jpg", "中.jpg"]);
    expect((await list("list-type=2&start-after=dir%2F")).keys).toEqual(["dir/b.jpg", "dir/c.jpg", "dir/sub/d.jpg", "dir/sub/e.jpg", "e.jpg", "中.jpg"]);
    // An empty token is no token: start-after applies, and no ContinuationToken is echoed.
    const empty = await list("list-type=2&continuation-token=&start-after=e.jpg");
    expect([empty.keys, empty.fields.ContinuationToken, empty.fields.StartAfter]).toEqual([["中.jpg"], undefined, "e.jpg"]);
    expect((await list("list-type=2")).fields.StartAfter).toBeUndefined();
  });

  const badTokens: [rule: string, raw: string][] = [
    ["not base64url of k:/p:", token("x:abc")],
    ["no colon", token("kabc")],
    ["capital K", token("K:abc")],
    ["the kind not first", token(" k:abc")],
    ["garbage", "%%%"],
  ];
  test.each(badTokens)("a continuation-token with %s is 400 InvalidArgument", async (_rule, raw) => {
    const a = await call("GET", `/s3/kura?list-type=2&continuation-token=${encodeURIComponent(raw)}`);
    expect(a.outcome).toBe("400 InvalidArgument");
    expect(tag(a.xml, "Message")).toContain("continuation-token");
  });

  test("encoding-type=url encodes every name in the answer and says so; other types are refused", async () => {
    const v1 = await list("encoding-type=url&prefix=dir%2F&delimiter=%2F&marker=dir%2Fb.jpg&max-keys=1");
    expect(v1.fields).toEqual({
      Name: "kura",
      Prefix: "dir%2F",
      Marker: "dir%2Fb.jpg",
      MaxKeys: "1",
      Delimiter: "%2F",
      EncodingType: "url",
      IsTruncated: "true",
      NextMarker: "dir%2Fc.jpg",
    });
    expect(v1.keys).toEqual(["dir%2Fc.jpg"]);
    const v2 = await list("list-type=2&encoding-type=url&prefix=dir%2F&delimiter=%2F&start-after=dir%2Fb.jpg");
    expect([v2.keys, v2.prefixes, v2.fields.StartAfter, v2.fields.Delimiter, v2.fields.EncodingType]).toEqual([
      ["dir%2Fc.jpg"],
      ["dir%2Fsub%2F"],
      "dir%2Fb.jpg",
      "%2F",
      "url",
    ]);
    expect((await list("encoding-type=url&prefix=%E4%B8%AD")).keys).toEqual(["%E4%B8%AD.jpg"]);
    expect((await list("prefix=b")).fields.EncodingType).toBeUndefined();
    expect((await list("list-type=2&prefix=b")).fields.EncodingType).toBeUndefined();
    expect((await list("encoding-type=URL")).outcome).toBe("400 InvalidArgument");
    expect((await list("list-type=2&encoding-type=xml")).outcome).toBe("400 InvalidArgument");
  });

  const commonPrefixes: [rule: string, marker: string, prefix: string, delimiter: string, expected: boolean][] = [
    ["a group at the top", "dir/", "", "/", true],
    ["a group under the prefix", "dir/sub/", "dir/", "/", true],
    ["the prefix itself is a key", "dir/", "dir/", "/", false],
    ["no delimiter, no groups", "dir/", "", "", false],
    ["a key, not ending at the delimiter", "dir/a.jpg", "", "/", false],
    ["two delimiters: only the first one ends a group", "dir/sub/", "", "/", false],
    ["not under the prefix", "dir/", "other/", "/", false],
    ["a longer delimiter", "a--", "", "--", true],
    ["a longer delimiter cut short", "a-", "", "--", false],
    ["a delimiter inside the prefix does not count", "a/b", "a/", "/", false],
    ["the delimiter right after the prefix", "a//", "a/", "/", true],
    ["the delimiter alone, at the very start", "/", "", "/", true],
    ["an empty delimiter: a marker equal to the prefix is no group", "dir", "dir", "", false],
    ["a marker outside the prefix that ends at a delimiter", "x/", "a", "/", false],
    ["a marker without the delimiter, shorter than it", "a", "", "--", false],
  ];
  test.each(commonPrefixes)("isCommonPrefix: %s (%j, prefix %j, delimiter %j) → %p", (_rule, marker, prefix, delimiter, expected) => {
    expect(isCommonPrefix(marker, prefix, delimiter)).toBe(expected);
  });
});

describe("write conditions (If-Match / If-None-Match on PutObject, Complete, CopyObject)", () => {
  const reqWith = (headers: Record<string, string>) =>
    ({ request: new Request(ORIGIN, { method: "PUT", headers }), user: { id: userId } }) as unknown as S3Request;
  const TAKEN = "cond/taken.jpg";
  const FREE = "cond/free.jpg";
  beforeAll(() => {
    clearKeys();
    storeKeys([TAKEN]);
    putFolder(app, userId, "cond/folder/");
  });
  afterAll(clearKeys);

  const cases: [rule: string, headers: Record<string, string>, key: string, expected: string][] = [
    ["no condition: nothing to hold", {}, TAKEN, "none"],
    ["If-None-Match: * on a free key", { "if-none-match": "*" }, FREE, "free"],
    ["If-None-Match: * with blanks", { "if-none-match": "  *  " }, FREE, "free"],
    ["If-None-Match: * on a taken key", { "if-none-match": "*" }, TAKEN, "412 PreconditionFailed"],
    ["If-None-Match: * on a folder marker", { "if-none-match": "*" }, "cond/folder/", "412 PreconditionFailed"],
    ["If-None-Match with an ETag is not offered", { "if-none-match": `"${MD5}"` }, TAKEN, "501 NotImplemented"],
    ["If-None-Match with an ETag, free key", { "if-none-match": `"${MD5}"` }, FREE, "501 NotImplemented"],
    ["If-None-Match empty", { "if-none-match": "" }, FREE, "501 NotImplemented"],
    ["If-None-Match: *, * is not *", { "if-none-match": "*, *" }, FREE, "501 NotImplemented"],
    ["If-Match: the current ETag", { "if-match": `"${MD5}"` }, TAKEN, "taken"],
    ["If-Match: a bare ETag (Java SDK v1)", { "if-match": MD5 }, TAKEN, "taken"],
    ["If-Match: a weak ETag", { "if-match": `W/"${MD5}"` }, TAKEN, "taken"],
    ["If-Match: a list holding it", { "if-match": `"x", ${MD5} ,"y"` }, TAKEN, "taken"],
    ["If-Match: *", { "if-match": "*" }, TAKEN, "taken"],
    ["If-Match: * in a list", { "if-match": `"x", *` }, TAKEN, "taken"],
    ["If-Match: another ETag", { "if-match": '"0000"' }, TAKEN, "412 PreconditionFailed"],
    ["If-Match: the ETag in other case", { "if-match": `"${MD5.toUpperCase()}"` }, TAKEN, "412 PreconditionFailed"],
    ["If-Match: empty", { "if-match": "" }, TAKEN, "412 PreconditionFailed"],
    ["If-Match on a free key", { "if-match": `"${MD5}"` }, FREE, "404 NoSuchKey"],
    ["If-Match: * on a free key", { "if-match": "*" }, FREE, "404 NoSuchKey"],
    ["If-Match matching and If-None-Match: * on a taken key", { "if-match": `"${MD5}"`, "if-none-match": "*" }, TAKEN, "412 PreconditionFailed"],
    ["If-Match not matching and If-None-Match: * on a free key", { "if-match": '"0000"', "if-none-match": "*" }, FREE, "404 NoSuchKey"],
    ["If-None-Match other than * is refused before If-Match is looked at", { "if-match": '"0000"', "if-none-match": '"0000"' }, FREE, "501 NotImplemented"],
  ];
  test.each(cases)("%s → %s", async (_rule, headers, key, expected) => {
    const id = app.db.query<{ id: string }, [string]>("SELECT id FROM images WHERE object_key = ?").get(TAKEN)!.id;
    let out: string;
    try {
      const got = await writeExpectation(app, reqWith(headers), key);
      out = got === undefined ? "none" : got.imageId === null ? "free" : got.imageId === id ? "taken" : `other ${got.imageId}`;
    } catch (err) {
      out = errorLabel(err);
    }
    expect(out).toBe(expected);
  });

  const lists: [header: string, tags: string[]][] = [
    ['"a"', ['"a"']],
    ['"a", W/"b", c', ['"a"', '"b"', '"c"']],
    ["*", ["*"]],
    [" * ", ["*"]],
    ["W/*", ["*"]],
    ["W/c", ['"c"']],
    ['"a",', ['"a"', '""']],
    ['w/"a"', ['"w/"a""']],
    ['"aW/b"', ['"aW/b"']],
  ];
  test.each(lists)("etagList(%j) → %j", (header, expected) => {
    expect(etagList(header)).toEqual(expected);
  });

  test("keyUnchanged: the key still holds what the condition saw, else 412", () => {
    const id = app.db.query<{ id: string }, [string]>("SELECT id FROM images WHERE object_key = ?").get(TAKEN)!.id;
    expect(refusal(() => keyUnchanged(app, userId, FREE, { imageId: null }))).toBe("ok");
    expect(refusal(() => keyUnchanged(app, userId, TAKEN, { imageId: id }))).toBe("ok");
    expect(refusal(() => keyUnchanged(app, userId, TAKEN, { imageId: null }))).toBe("412 PreconditionFailed");
    expect(refusal(() => keyUnchanged(app, userId, TAKEN, { imageId: "other" }))).toBe("412 PreconditionFailed");
    expect(refusal(() => keyUnchanged(app, userId, FREE, { imageId: id }))).toBe("412 PreconditionFailed");
  });
});

describe("folder keys", () => {
  const cases: [key: string, folder: boolean][] = [
    ["a/", true],
    ["a/b/", true],
    ["中/", true],
    ["a", false],
    ["", false],
    ["/", false],
    ["a//", false],
    ["/a/", false],
    ["./", false],
    ["../", false],
    ["a/./", false],
    ["a\\/", false],
  ];
  test.each(cases)("isFolderKey(%j) → %p", (key, folder) => {
    expect(isFolderKey(key)).toBe(folder);
  });

  test("a folder marker is stored, found, told apart from an image and deleted once", () => {
    clearKeys();
    expect(folderByKey(app, userId, "f/")).toBeUndefined();
    putFolder(app, userId, "f/");
    putFolder(app, userId, "f/");
    const folder = folderByKey(app, userId, "f/")!;
    expect([folder.object_key, folder.size, isFolderObject(folder)]).toEqual(["f/", 0, true]);
    expect(isFolderObject({ ...folder, blob_id: blobId } as S3Object)).toBe(false);
    expect(deleteFolder(app, userId, "f/")).toBe(true);
    expect(deleteFolder(app, userId, "f/")).toBe(false);
    expect(folderByKey(app, userId, "f/")).toBeUndefined();
  });
});

describe("property: a key encoded as clients encode it routes back to itself", () => {
  /** Pieces that stress the path: escapes, `+`, `%`, reserved characters, slashes, multi-byte UTF-8. */
  const piece = fc.constantFrom(
    "a",
    "Z",
    "0",
    "/",
    "%",
    "%2F",
    "+",
    " ",
    "?",
    "#",
    "&",
    "=",
    "!",
    "'",
    "(",
    "*",
    "~",
    "-",
    "_",
    ".",
    "中",
    "é",
    "😀",
    "\uE000",
    "\\",
    ";",
    ":",
    "@",
    "$",
    ",",
  );
  const key = fc
    .array(fc.oneof(piece, fc.string({ unit: "grapheme", maxLength: 3 })), { maxLength: 12 })
    .map((parts) => parts.join(""))
    // The URL parser resolves `.` and `..` segments before the server sees them.
    .filter((k) => !k.split("/").some((s) => s === "." || s === ".."));

  test("objectUrl → signed request → authenticateS3 gives the key back, and the query value back", () => {
    fc.assert(
      fc.property(key, key, (k, prefix) => {
        const url = objectUrl(ORIGIN, "kura", k);
        const target = `${url.slice(ORIGIN.length)}?prefix=${encodeURIComponent(prefix)}`;
        const req = authenticateS3(app, signed("GET", target), "P");
        expect({ bucket: req.bucket, key: req.key, prefix: req.query.get("prefix") }).toEqual({ bucket: "kura", key: k, prefix });
        expect(splitS3Path(rawTarget(url).path)).toEqual({ bucket: "kura", key: k });
      }),
      { seed: 20261129, numRuns: 300 },
    );
  });
});
