/** The /s3/ surface driven by the real AWS SDK for JavaScript v3 against a real Kura. */
import {
  AbortMultipartUploadCommand,
  CompleteMultipartUploadCommand,
  CopyObjectCommand,
  CreateMultipartUploadCommand,
  DeleteObjectCommand,
  DeleteObjectsCommand,
  GetObjectCommand,
  HeadBucketCommand,
  HeadObjectCommand,
  ListBucketsCommand,
  ListObjectsV2Command,
  PutObjectCommand,
  UploadPartCommand,
  type S3Client,
} from "@aws-sdk/client-s3";
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { createHash } from "node:crypto";
import { Readable } from "node:stream";
import { makeJpeg, makePng, noisePng, sha256 } from "../helpers/images";
import { sdkClient, startS3Fixture, type S3Fixture } from "./s3-setup";

const md5 = (b: Uint8Array) => createHash("md5").update(b).digest("hex");
const B = "kura";
let lastMessage = "";

/** The SDK error name and HTTP status of a failing call. */
async function failure(p: Promise<unknown>): Promise<{ name: string; status: number | undefined }> {
  try {
    await p;
  } catch (err) {
    const e = err as { name: string; message: string; $metadata?: { httpStatusCode?: number } };
    lastMessage = e.message;
    return { name: e.name, status: e.$metadata?.httpStatusCode };
  }
  throw new Error("expected the call to fail");
}

describe("S3 surface with @aws-sdk/client-s3", () => {
  let f: S3Fixture;
  let s3: S3Client;
  let jpeg: Buffer;
  beforeAll(async () => {
    f = await startS3Fixture({ max_upload_mb: 20 });
    s3 = sdkClient(f.cred);
    jpeg = await makeJpeg(96, 64, 11);
  });
  afterAll(() => f.server.dispose());

  test("PutObject (buffer) answers the MD5 ETag; HEAD and GET return bytes, type, metadata; /o/ serves the alias", async () => {
    const put = await s3.send(
      new PutObjectCommand({ Bucket: B, Key: "2026/cat one.jpg", Body: jpeg, ContentType: "image/jpeg", Metadata: { mtime: "1795384597.5" } }),
    );
    expect(put.ETag).toBe(`"${md5(jpeg)}"`);
    const head = await s3.send(new HeadObjectCommand({ Bucket: B, Key: "2026/cat one.jpg" }));
    expect(head).toMatchObject({ ContentLength: jpeg.length, ContentType: "image/jpeg", ETag: `"${md5(jpeg)}"`, Metadata: { mtime: "1795384597.5" } });
    expect(Math.abs(head.LastModified!.getTime() - Date.now())).toBeLessThan(60_000);
    const got = await s3.send(new GetObjectCommand({ Bucket: B, Key: "2026/cat one.jpg" }));
    expect(sha256(await got.Body!.transformToByteArray())).toBe(sha256(jpeg));
    const ranged = await s3.send(new GetObjectCommand({ Bucket: B, Key: "2026/cat one.jpg", Range: "bytes=10-109" }));
    expect(ranged.$metadata.httpStatusCode).toBe(206);
    expect(ranged.ContentRange).toBe(`bytes 10-109/${jpeg.length}`);
    expect(Buffer.from(await ranged.Body!.transformToByteArray()).equals(jpeg.subarray(10, 110))).toBe(true);
    const served = await fetch(`${f.cred.url_prefix}2026/cat%20one.jpg`);
    expect(served.status).toBe(200);
    expect(sha256(new Uint8Array(await served.arrayBuffer()))).toBe(sha256(jpeg)); // exif policy does not apply: bytes untouched
  });

  test("PutObject from a stream (aws-chunked with a CRC32 trailer) stores the decoded bytes; re-upload re-points the key", async () => {
    const png = await makePng(50, 40, 4);
    const stream = Readable.from([png.subarray(0, 100), png.subarray(100)]);
    const put = await s3.send(new PutObjectCommand({ Bucket: B, Key: "stream/p.png", Body: stream, ContentLength: png.length }));
    expect(put.ETag).toBe(`"${md5(png)}"`);
    const got = await s3.send(new GetObjectCommand({ Bucket: B, Key: "stream/p.png" }));
    expect(got.ContentType).toBe("image/png");
    expect(sha256(await got.Body!.transformToByteArray())).toBe(sha256(png));
    const other = await makePng(20, 20, 9);
    await s3.send(new PutObjectCommand({ Bucket: B, Key: "stream/p.png", Body: other }));
    const again = await s3.send(new GetObjectCommand({ Bucket: B, Key: "stream/p.png" }));
    expect(sha256(await again.Body!.transformToByteArray())).toBe(sha256(other));
  });

  test("missing keys: HEAD 404 NotFound, GET NoSuchKey", async () => {
    expect(await failure(s3.send(new HeadObjectCommand({ Bucket: B, Key: "nope.jpg" })))).toEqual({ name: "NotFound", status: 404 });
    expect(await failure(s3.send(new GetObjectCommand({ Bucket: B, Key: "nope.jpg" })))).toEqual({ name: "NoSuchKey", status: 404 });
  });

  test("a client whose clock is 30 minutes off corrects it from a HEAD answer's Date, as from any other", async () => {
    await s3.send(new PutObjectCommand({ Bucket: B, Key: "skew/a.jpg", Body: jpeg }));
    // The SDK reads the server's time from Date (a HEAD has no body to carry <ServerTime>), takes the
    // difference as its offset and retries once. The machine's clock is what is off: Date.now here.
    const realNow = Date.now;
    Date.now = () => realNow() - 30 * 60_000;
    try {
      for (const send of [
        (c: S3Client) => c.send(new HeadObjectCommand({ Bucket: B, Key: "skew/a.jpg" })),
        (c: S3Client) => c.send(new HeadBucketCommand({ Bucket: B })),
      ]) {
        const skewed = sdkClient(f.cred, { maxAttempts: 2 });
        const answer = await send(skewed);
        expect(answer.$metadata.attempts).toBe(2);
        expect(Math.abs(skewed.config.systemClockOffset - 30 * 60_000)).toBeLessThan(60_000);
      }
    } finally {
      Date.now = realNow;
    }
  });

  test("ListObjectsV2 groups by delimiter and paginates with continuation tokens", async () => {
    for (const key of ["list/a.jpg", "list/b.jpg", "list/c.jpg", "list/sub/d.jpg", "list/sub/e.jpg", "list/z/f.jpg"]) {
      await s3.send(new PutObjectCommand({ Bucket: B, Key: key, Body: jpeg }));
    }
    const top = await s3.send(new ListObjectsV2Command({ Bucket: B, Prefix: "list/", Delimiter: "/" }));
    expect(top.Contents!.map((c) => c.Key)).toEqual(["list/a.jpg", "list/b.jpg", "list/c.jpg"]);
    expect(top.Contents![0]).toMatchObject({ Size: jpeg.length, ETag: `"${md5(jpeg)}"`, StorageClass: "STANDARD" });
    expect(top.CommonPrefixes!.map((p) => p.Prefix)).toEqual(["list/sub/", "list/z/"]);
    const seen: string[] = [];
    let token: string | undefined;
    let pages = 0;
    do {
      const page = await s3.send(new ListObjectsV2Command({ Bucket: B, Prefix: "list/", Delimiter: "/", MaxKeys: 2, ContinuationToken: token }));
      seen.push(...(page.Contents ?? []).map((c) => c.Key!), ...(page.CommonPrefixes ?? []).map((p) => p.Prefix!));
      expect(page.KeyCount).toBeLessThanOrEqual(2);
      token = page.NextContinuationToken;
      pages++;
    } while (token);
    expect(pages).toBe(3);
    expect(seen).toEqual(["list/a.jpg", "list/b.jpg", "list/c.jpg", "list/sub/", "list/z/"]);
    const buckets = await s3.send(new ListBucketsCommand({}));
    expect(buckets.Buckets!.map((b) => b.Name)).toEqual(["kura"]);
  });

  test("CopyObject makes a second key for the same image; DeleteObject and DeleteObjects remove keys", async () => {
    await s3.send(new PutObjectCommand({ Bucket: B, Key: "copy/src.jpg", Body: jpeg, Metadata: { mtime: "1" } }));
    const copied = await s3.send(new CopyObjectCommand({ Bucket: B, Key: "copy/dst.jpg", CopySource: `${B}/copy/src.jpg` }));
    expect(copied.CopyObjectResult!.ETag).toBe(`"${md5(jpeg)}"`);
    expect((await s3.send(new HeadObjectCommand({ Bucket: B, Key: "copy/dst.jpg" }))).Metadata).toEqual({ mtime: "1" });
    await s3.send(
      new CopyObjectCommand({ Bucket: B, Key: "copy/src.jpg", CopySource: `${B}/copy/src.jpg`, MetadataDirective: "REPLACE", Metadata: { mtime: "2" } }),
    );
    expect((await s3.send(new HeadObjectCommand({ Bucket: B, Key: "copy/src.jpg" }))).Metadata).toEqual({ mtime: "2" });

    const del = await s3.send(new DeleteObjectCommand({ Bucket: B, Key: "copy/src.jpg" }));
    expect(del.$metadata.httpStatusCode).toBe(204);
    expect((await failure(s3.send(new HeadObjectCommand({ Bucket: B, Key: "copy/src.jpg" })))).status).toBe(404);
    expect((await s3.send(new DeleteObjectCommand({ Bucket: B, Key: "copy/never.jpg" }))).$metadata.httpStatusCode).toBe(204);
    // The copy still serves: it is its own reference.
    expect((await s3.send(new HeadObjectCommand({ Bucket: B, Key: "copy/dst.jpg" }))).ContentLength).toBe(jpeg.length);

    await s3.send(new PutObjectCommand({ Bucket: B, Key: "copy/x.jpg", Body: jpeg }));
    const many = await s3.send(new DeleteObjectsCommand({ Bucket: B, Delete: { Objects: [{ Key: "copy/dst.jpg" }, { Key: "copy/x.jpg" }] } }));
    expect(many.Deleted!.map((d) => d.Key).sort()).toEqual(["copy/dst.jpg", "copy/x.jpg"]);
    const left = await s3.send(new ListObjectsV2Command({ Bucket: B, Prefix: "copy/" }));
    expect(left.KeyCount).toBe(0);
  });

  test("multipart upload of ~11 MiB with parts sent out of order", async () => {
    const png = await noisePng(2200, 1700);
    expect(png.length).toBeGreaterThan(10.5 * 1024 * 1024);
    const key = "big/noise.png";
    const { UploadId } = await s3.send(new CreateMultipartUploadCommand({ Bucket: B, Key: key, ContentType: "image/png", Metadata: { md5chksum: "x" } }));
    const size = 5 * 1024 * 1024;
    const pieces = [png.subarray(0, size), png.subarray(size, 2 * size), png.subarray(2 * size)];
    const etags: string[] = [];
    for (const n of [3, 1, 2]) {
      const part = await s3.send(new UploadPartCommand({ Bucket: B, Key: key, UploadId, PartNumber: n, Body: pieces[n - 1] }));
      expect(part.ETag).toBe(`"${md5(pieces[n - 1]!)}"`);
      etags[n - 1] = part.ETag!;
    }
    const bad = failure(
      s3.send(
        new CompleteMultipartUploadCommand({
          Bucket: B,
          Key: key,
          UploadId,
          MultipartUpload: { Parts: [{ PartNumber: 1, ETag: '"00000000000000000000000000000000"' }] },
        }),
      ),
    );
    expect((await bad).name).toBe("InvalidPart");
    const done = await s3.send(
      new CompleteMultipartUploadCommand({ Bucket: B, Key: key, UploadId, MultipartUpload: { Parts: etags.map((ETag, i) => ({ ETag, PartNumber: i + 1 })) } }),
    );
    const expected = md5(Buffer.concat(pieces.map((p) => Buffer.from(md5(p), "hex"))));
    expect(done.ETag).toBe(`"${expected}-3"`);
    const head = await s3.send(new HeadObjectCommand({ Bucket: B, Key: key }));
    expect(head).toMatchObject({ ContentLength: png.length, ETag: `"${expected}-3"`, Metadata: { md5chksum: "x" } });
    const got = await s3.send(new GetObjectCommand({ Bucket: B, Key: key }));
    expect(sha256(await got.Body!.transformToByteArray())).toBe(sha256(png));
    // The upload is gone after Complete; an aborted one answers NoSuchUpload afterwards.
    const second = await s3.send(new CreateMultipartUploadCommand({ Bucket: B, Key: "big/abort.png" }));
    await s3.send(new UploadPartCommand({ Bucket: B, Key: "big/abort.png", UploadId: second.UploadId, PartNumber: 1, Body: pieces[2] }));
    const aborted = await s3.send(new AbortMultipartUploadCommand({ Bucket: B, Key: "big/abort.png", UploadId: second.UploadId }));
    expect(aborted.$metadata.httpStatusCode).toBe(204);
    const late = failure(s3.send(new UploadPartCommand({ Bucket: B, Key: "big/abort.png", UploadId: second.UploadId, PartNumber: 2, Body: pieces[2] })));
    expect(await late).toEqual({ name: "NoSuchUpload", status: 404 });
  }, 60_000);

  test("a non-image body is InvalidArgument with a Chinese reason, and nothing is stored", async () => {
    const err = await failure(s3.send(new PutObjectCommand({ Bucket: B, Key: "bad/text.jpg", Body: "just some text, not an image" })));
    expect(err).toEqual({ name: "InvalidArgument", status: 400 });
    expect(lastMessage).toContain("不支持的图片格式");
    const raw = await s3.send(new ListObjectsV2Command({ Bucket: B, Prefix: "bad/" }));
    expect(raw.KeyCount).toBe(0);
  });

  test("a wrong secret is SignatureDoesNotMatch; a revoked token's key is refused", async () => {
    const wrong = sdkClient(f.cred, { secret: "not-the-secret-at-all" });
    expect(await failure(wrong.send(new PutObjectCommand({ Bucket: B, Key: "w.jpg", Body: jpeg })))).toEqual({ name: "SignatureDoesNotMatch", status: 403 });
    const token = await f.admin.json("POST", "/api/admin/tokens", { name: "short-lived" }, 201);
    const cred = await f.admin.json("POST", `/api/admin/tokens/${token.id}/s3-credential`);
    const client = sdkClient(cred);
    await client.send(new PutObjectCommand({ Bucket: B, Key: "revoked/ok.jpg", Body: jpeg }));
    await f.admin.json("POST", `/api/admin/tokens/${token.id}/revoke`, undefined, 204);
    expect(await failure(client.send(new HeadObjectCommand({ Bucket: B, Key: "revoked/ok.jpg" })))).toMatchObject({ status: 403 });
    expect(await failure(client.send(new GetObjectCommand({ Bucket: B, Key: "revoked/ok.jpg" })))).toEqual({ name: "InvalidAccessKeyId", status: 403 });
  });
});

describe("S3 errors are XML", () => {
  let f: S3Fixture;
  beforeAll(async () => {
    f = await startS3Fixture();
  });
  afterAll(() => f.server.dispose());

  test("an unsigned request is AccessDenied as an S3 XML error body", async () => {
    const res = await fetch(`${f.server.base}/s3/kura/a.jpg`);
    expect(res.status).toBe(403);
    expect(res.headers.get("content-type")).toBe("application/xml");
    const text = await res.text();
    expect(text).toContain("<Code>AccessDenied</Code>");
    expect(text).toMatch(/<Message>[^<]*[\u4e00-\u9fff]/);
    expect(text).toContain("<Resource>/s3/kura/a.jpg</Resource>");
  });
});
