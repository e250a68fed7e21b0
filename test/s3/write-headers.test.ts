/**
 * What a write's headers ask beyond the bytes, with the AWS SDK as the client:
 * - S3 features Kura does not have (SSE-C, SSE-KMS, object lock) are 501 NotImplemented before the body
 *   is read, on PutObject, CreateMultipartUpload, UploadPart, CopyObject and POST Object: never stored
 *   and then served in clear. AES256 (SSE-S3) is accepted; a storage class other than STANDARD is
 *   400 InvalidStorageClass; tagging is ignored.
 * - User metadata is limited to AWS's 2 KB (400 MetadataTooLarge).
 * - Cache-Control, Content-Disposition, Content-Language and Expires are kept as system metadata and
 *   returned on GET/HEAD under /s3/ (CopyObject's COPY keeps them, REPLACE replaces them), while /o/
 *   sends none of them and keeps the image's own type and nosniff.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import {
  CompleteMultipartUploadCommand,
  CopyObjectCommand,
  CreateMultipartUploadCommand,
  GetObjectCommand,
  HeadObjectCommand,
  ListMultipartUploadsCommand,
  PutObjectCommand,
  UploadPartCommand,
  type S3Client,
} from "@aws-sdk/client-s3";
import { createPresignedPost } from "@aws-sdk/s3-presigned-post";
import { randomBytes } from "node:crypto";
import { makeJpeg } from "../helpers/images";
import { responseCodeOf, sdkClient, signedRequest, startS3Fixture, type S3Fixture } from "./s3-setup";

const B = "kura";
let f: S3Fixture;
let s3: S3Client;
let jpeg: Buffer;
const failure = (p: Promise<unknown>) =>
  p.then(
    () => "ok",
    (e: { name: string; $metadata?: { httpStatusCode?: number } }) => `${e.$metadata?.httpStatusCode} ${e.name}`,
  );
const stored = async (key: string) => (await signedRequest(f, "HEAD", `/s3/${B}/${key}`)).status;
const SSE_C = { SSECustomerAlgorithm: "AES256", SSECustomerKey: randomBytes(32).toString("base64") };

beforeAll(async () => {
  f = await startS3Fixture({ upload_rate_per_min: 1_000_000 });
  s3 = sdkClient(f.cred);
  jpeg = await makeJpeg(40, 30, 9301);
});
afterAll(() => f.server.dispose());

describe("unsupported features are refused, not dropped", () => {
  test("PutObject with SSE-C, SSE-KMS or object lock is 501 and stores nothing (also not on /o/)", async () => {
    const asks = [
      SSE_C,
      { ServerSideEncryption: "aws:kms" as const },
      { ServerSideEncryption: "aws:kms" as const, SSEKMSKeyId: "alias/x" },
      { ServerSideEncryption: "aws:kms:dsse" as const },
      { ObjectLockMode: "GOVERNANCE" as const, ObjectLockRetainUntilDate: new Date(Date.now() + 86_400_000) },
      { ObjectLockLegalHoldStatus: "ON" as const },
    ];
    for (const [i, ask] of asks.entries()) {
      const key = `sse/put-${i}.jpg`;
      expect(await failure(s3.send(new PutObjectCommand({ Bucket: B, Key: key, Body: jpeg, ContentType: "image/jpeg", ...ask })))).toBe("501 NotImplemented");
      expect(await stored(key)).toBe(404);
      expect((await fetch(`${f.cred.url_prefix}${key}`)).status).toBe(404);
    }
  });

  test("the refusal comes before the body is read: a body that is no image still gets 501, not 400", async () => {
    const res = await signedRequest(f, "PUT", `/s3/${B}/sse/text.jpg`, {
      body: "not an image",
      headers: { "x-amz-server-side-encryption-customer-algorithm": "AES256" },
    });
    const text = await res.text();
    expect([res.status, /<Code>([^<]+)/.exec(text)?.[1]]).toEqual([501, "NotImplemented"]);
    expect(text).toContain("SSE-C");
  });

  test("AES256 is accepted; another encryption value is 400 InvalidArgument", async () => {
    expect(await failure(s3.send(new PutObjectCommand({ Bucket: B, Key: "sse/aes.jpg", Body: jpeg, ServerSideEncryption: "AES256" })))).toBe("ok");
    const odd = await signedRequest(f, "PUT", `/s3/${B}/sse/odd.jpg`, { body: jpeg, headers: { "x-amz-server-side-encryption": "AES128" } });
    expect([odd.status, await responseCodeOf(odd)]).toEqual([400, "InvalidArgument"]);
    expect(await stored("sse/odd.jpg")).toBe(404);
  });

  test("storage class: STANDARD is accepted, any other is 400 InvalidStorageClass; tagging is accepted and ignored", async () => {
    expect(await failure(s3.send(new PutObjectCommand({ Bucket: B, Key: "sc/std.jpg", Body: jpeg, StorageClass: "STANDARD", Tagging: "a=b" })))).toBe("ok");
    for (const StorageClass of ["GLACIER", "STANDARD_IA", "REDUCED_REDUNDANCY"] as const) {
      expect(await failure(s3.send(new PutObjectCommand({ Bucket: B, Key: "sc/cold.jpg", Body: jpeg, StorageClass })))).toBe("400 InvalidStorageClass");
    }
    expect(await stored("sc/cold.jpg")).toBe(404);
  });

  test("CreateMultipartUpload, UploadPart and CopyObject refuse them too", async () => {
    expect(await failure(s3.send(new CreateMultipartUploadCommand({ Bucket: B, Key: "sse/mp.jpg", ...SSE_C })))).toBe("501 NotImplemented");
    expect(await failure(s3.send(new CreateMultipartUploadCommand({ Bucket: B, Key: "sse/mp.jpg", ServerSideEncryption: "aws:kms" })))).toBe(
      "501 NotImplemented",
    );
    expect(await failure(s3.send(new CreateMultipartUploadCommand({ Bucket: B, Key: "sse/mp.jpg", ObjectLockLegalHoldStatus: "ON" })))).toBe(
      "501 NotImplemented",
    );
    expect((await s3.send(new ListMultipartUploadsCommand({ Bucket: B }))).Uploads ?? []).toEqual([]);
    const { UploadId } = await s3.send(new CreateMultipartUploadCommand({ Bucket: B, Key: "sse/mp.jpg" }));
    expect(await failure(s3.send(new UploadPartCommand({ Bucket: B, Key: "sse/mp.jpg", UploadId, PartNumber: 1, Body: jpeg, ...SSE_C })))).toBe(
      "501 NotImplemented",
    );
    await s3.send(new PutObjectCommand({ Bucket: B, Key: "sse/src.jpg", Body: jpeg }));
    const copy = (extra: object) => s3.send(new CopyObjectCommand({ Bucket: B, Key: "sse/copy.jpg", CopySource: `${B}/sse/src.jpg`, ...extra }));
    expect(await failure(copy(SSE_C))).toBe("501 NotImplemented");
    expect(await failure(copy({ CopySourceSSECustomerAlgorithm: "AES256", CopySourceSSECustomerKey: SSE_C.SSECustomerKey }))).toBe("501 NotImplemented");
    expect(await failure(copy({ ObjectLockMode: "COMPLIANCE", ObjectLockRetainUntilDate: new Date(Date.now() + 86_400_000) }))).toBe("501 NotImplemented");
    expect(await failure(copy({ StorageClass: "GLACIER" }))).toBe("400 InvalidStorageClass");
    expect(await stored("sse/copy.jpg")).toBe(404);
  });

  test("POST Object (browser form) refuses them as fields", async () => {
    const post = await createPresignedPost(s3, { Bucket: B, Key: "sse/form.jpg", Expires: 600, Fields: { "x-amz-server-side-encryption": "aws:kms" } });
    const form = new FormData();
    for (const [k, v] of Object.entries(post.fields)) form.append(k, v);
    form.append("file", new Blob([new Uint8Array(jpeg)], { type: "image/jpeg" }), "a.jpg");
    const res = await fetch(post.url, { method: "POST", body: form });
    expect([res.status, await responseCodeOf(res)]).toEqual([501, "NotImplemented"]);
    expect(await stored("sse/form.jpg")).toBe(404);
  });
});

describe("user metadata is limited to 2 KB", () => {
  // Names count without `x-amz-meta-`: 1 + 2047 bytes is exactly the limit.
  const fits = { a: "x".repeat(2047) };
  const over = { a: "x".repeat(2048) };

  test("PutObject: 2048 bytes are stored, 2049 are 400 MetadataTooLarge and nothing is written", async () => {
    expect(await failure(s3.send(new PutObjectCommand({ Bucket: B, Key: "meta/fits.jpg", Body: jpeg, Metadata: fits })))).toBe("ok");
    expect((await s3.send(new HeadObjectCommand({ Bucket: B, Key: "meta/fits.jpg" }))).Metadata).toEqual(fits);
    expect(await failure(s3.send(new PutObjectCommand({ Bucket: B, Key: "meta/over.jpg", Body: jpeg, Metadata: over })))).toBe("400 MetadataTooLarge");
    expect(await stored("meta/over.jpg")).toBe(404);
  });

  test("several entries add up, a UTF-8 value counted in bytes (中 is 3)", async () => {
    // fetch sends a header value byte for byte as Latin-1 characters: this is 900 bytes of UTF-8 on the wire.
    const utf8 = Buffer.from("中".repeat(300)).toString("latin1");
    const put = (two: number) =>
      signedRequest(f, "PUT", `/s3/${B}/meta/spread.jpg`, { body: jpeg, headers: { "x-amz-meta-one": utf8, "x-amz-meta-two": "y".repeat(two) } });
    const refused = await put(1143);
    expect([refused.status, await responseCodeOf(refused)]).toEqual([400, "MetadataTooLarge"]);
    expect(await stored("meta/spread.jpg")).toBe(404);
    expect((await put(1142)).status).toBe(200);
  });

  test("CreateMultipartUpload and CopyObject with REPLACE check it too", async () => {
    expect(await failure(s3.send(new CreateMultipartUploadCommand({ Bucket: B, Key: "meta/mp.jpg", Metadata: over })))).toBe("400 MetadataTooLarge");
    const replace = s3.send(
      new CopyObjectCommand({ Bucket: B, Key: "meta/fits.jpg", CopySource: `${B}/meta/fits.jpg`, MetadataDirective: "REPLACE", Metadata: over }),
    );
    expect(await failure(replace)).toBe("400 MetadataTooLarge");
    expect((await s3.send(new HeadObjectCommand({ Bucket: B, Key: "meta/fits.jpg" }))).Metadata).toEqual(fits);
  });
});

describe("system metadata", () => {
  const expires = new Date("2031-05-06T07:08:09Z");
  const system = { CacheControl: "max-age=60", ContentDisposition: 'attachment; filename="p.jpg"', ContentLanguage: "zh-CN", Expires: expires };
  const systemOf = (h: { CacheControl?: string; ContentDisposition?: string; ContentLanguage?: string; Expires?: Date; ContentEncoding?: string }) => ({
    CacheControl: h.CacheControl,
    ContentDisposition: h.ContentDisposition,
    ContentLanguage: h.ContentLanguage,
    Expires: h.Expires?.toISOString(),
    ContentEncoding: h.ContentEncoding,
  });
  const sent = { ...system, Expires: expires.toISOString(), ContentEncoding: undefined };

  test("PutObject keeps Cache-Control, Content-Disposition, Content-Language and Expires; GET and HEAD return them, never the Content-Encoding", async () => {
    await s3.send(new PutObjectCommand({ Bucket: B, Key: "sys/a.jpg", Body: jpeg, ContentType: "text/html", ContentEncoding: "gzip", ...system }));
    const head = await s3.send(new HeadObjectCommand({ Bucket: B, Key: "sys/a.jpg" }));
    expect([systemOf(head), head.ContentType]).toEqual([sent, "image/jpeg"]);
    const got = await s3.send(new GetObjectCommand({ Bucket: B, Key: "sys/a.jpg" }));
    expect(systemOf(got)).toEqual(sent);
    expect(Buffer.from(await got.Body!.transformToByteArray()).equals(jpeg)).toBe(true);
    // A response-* override still wins.
    const renamed = await s3.send(new GetObjectCommand({ Bucket: B, Key: "sys/a.jpg", ResponseContentDisposition: "inline" }));
    expect(renamed.ContentDisposition).toBe("inline");
    await renamed.Body?.transformToByteArray();
  });

  test("/o/ sends none of them: the image's own type, nosniff, no stored Content-Disposition", async () => {
    const res = await fetch(`${f.cred.url_prefix}sys/a.jpg`);
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toBe("image/jpeg");
    expect(res.headers.get("x-content-type-options")).toBe("nosniff");
    expect(res.headers.get("content-disposition")).toBeNull();
    expect(res.headers.get("content-language")).toBeNull();
    expect(res.headers.get("content-encoding")).toBeNull();
    expect(res.headers.get("cache-control")).not.toBe("max-age=60");
    expect(Buffer.from(await res.arrayBuffer()).equals(jpeg)).toBe(true);
  });

  test("CopyObject: COPY carries them over, REPLACE replaces them with the request's", async () => {
    await s3.send(new CopyObjectCommand({ Bucket: B, Key: "sys/copy.jpg", CopySource: `${B}/sys/a.jpg` }));
    expect(systemOf(await s3.send(new HeadObjectCommand({ Bucket: B, Key: "sys/copy.jpg" })))).toEqual(sent);
    await s3.send(
      new CopyObjectCommand({ Bucket: B, Key: "sys/copy.jpg", CopySource: `${B}/sys/copy.jpg`, MetadataDirective: "REPLACE", CacheControl: "no-cache" }),
    );
    const replaced = await s3.send(new HeadObjectCommand({ Bucket: B, Key: "sys/copy.jpg" }));
    expect(systemOf(replaced)).toEqual({
      CacheControl: "no-cache",
      ContentDisposition: undefined,
      ContentLanguage: undefined,
      Expires: undefined,
      ContentEncoding: undefined,
    });
  });

  test("a browser form's fields are stored as the headers they stand for: non-ASCII metadata goes back out as UTF-8, HEAD never fails", async () => {
    const fields = { "x-amz-meta-title": "中文 标题", "Content-Disposition": "inline" };
    const post = await createPresignedPost(s3, { Bucket: B, Key: "sys/form.jpg", Expires: 600, Fields: fields });
    const form = new FormData();
    for (const [k, v] of Object.entries(post.fields)) form.append(k, v);
    form.append("file", new Blob([new Uint8Array(jpeg)], { type: "image/jpeg" }), "a.jpg");
    expect((await fetch(post.url, { method: "POST", body: form })).status).toBe(204);
    const head = await signedRequest(f, "HEAD", `/s3/${B}/sys/form.jpg`);
    expect(head.status).toBe(200);
    // fetch reads header bytes as Latin-1 characters: these are the UTF-8 bytes of the title.
    expect(Buffer.from(head.headers.get("x-amz-meta-title")!, "latin1").toString("utf8")).toBe("中文 标题");
    expect(head.headers.get("content-disposition")).toBe("inline");
  });

  test("a multipart upload keeps what CreateMultipartUpload carried", async () => {
    const { UploadId } = await s3.send(new CreateMultipartUploadCommand({ Bucket: B, Key: "sys/mp.jpg", ...system }));
    const part = await s3.send(new UploadPartCommand({ Bucket: B, Key: "sys/mp.jpg", UploadId, PartNumber: 1, Body: jpeg }));
    await s3.send(
      new CompleteMultipartUploadCommand({ Bucket: B, Key: "sys/mp.jpg", UploadId, MultipartUpload: { Parts: [{ PartNumber: 1, ETag: part.ETag }] } }),
    );
    expect(systemOf(await s3.send(new HeadObjectCommand({ Bucket: B, Key: "sys/mp.jpg" })))).toEqual(sent);
  });
});
