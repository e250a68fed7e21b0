/**
 * Reads that resuming uploaders and part-based downloaders make (client protocol audit LOW-5, -8):
 * ListParts of an open upload, GET/HEAD `?partNumber=`, and the `response-*` overrides of a signed GET
 * (kept to image and download types: Kura's origin never serves a page).
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import {
  AbortMultipartUploadCommand,
  CreateMultipartUploadCommand,
  GetObjectCommand,
  HeadObjectCommand,
  ListPartsCommand,
  PutObjectCommand,
  UploadPartCommand,
  type S3Client,
} from "@aws-sdk/client-s3";
import { createHash } from "node:crypto";
import { makeJpeg } from "../helpers/images";
import { sdkClient, signedRequest, startS3Fixture, type S3Fixture } from "./s3-setup";

const md5 = (b: Uint8Array) => createHash("md5").update(b).digest("hex");
const B = "kura";
let f: S3Fixture;
let s3: S3Client;
let jpeg: Uint8Array;
const failure = (p: Promise<unknown>) =>
  p.then(
    () => "ok",
    (e: { name: string; $metadata?: { httpStatusCode?: number } }) => `${e.$metadata?.httpStatusCode} ${e.name}`,
  );

beforeAll(async () => {
  f = await startS3Fixture();
  s3 = sdkClient(f.cred);
  jpeg = await makeJpeg(64, 48, 7501);
  await s3.send(new PutObjectCommand({ Bucket: B, Key: "r/a.jpg", Body: jpeg, ContentType: "image/jpeg" }));
});
afterAll(() => f.server.dispose());

describe("ListParts", () => {
  test("lists the stored parts in order with size and ETag, pages by part-number-marker, and ends with the upload", async () => {
    const key = "parts/p.png";
    const { UploadId } = await s3.send(new CreateMultipartUploadCommand({ Bucket: B, Key: key }));
    const bodies = [new Uint8Array(3000).fill(1), new Uint8Array(2000).fill(2), new Uint8Array(1000).fill(3)];
    for (const n of [3, 1, 2]) await s3.send(new UploadPartCommand({ Bucket: B, Key: key, UploadId, PartNumber: n, Body: bodies[n - 1] }));
    const all = await s3.send(new ListPartsCommand({ Bucket: B, Key: key, UploadId }));
    expect(all.Parts?.map((p) => [p.PartNumber, p.Size, p.ETag])).toEqual(bodies.map((b, i) => [i + 1, b.length, `"${md5(b)}"`]));
    expect([all.IsTruncated, all.Key, all.UploadId]).toEqual([false, key, UploadId]);
    const first = await s3.send(new ListPartsCommand({ Bucket: B, Key: key, UploadId, MaxParts: 2 }));
    expect([first.Parts?.map((p) => p.PartNumber), first.IsTruncated, first.NextPartNumberMarker]).toEqual([[1, 2], true, "2"]);
    const rest = await s3.send(new ListPartsCommand({ Bucket: B, Key: key, UploadId, PartNumberMarker: first.NextPartNumberMarker }));
    expect([rest.Parts?.map((p) => p.PartNumber), rest.IsTruncated]).toEqual([[3], false]);
    // Another key with the same id is another (unknown) upload, as for every multipart step.
    expect(await failure(s3.send(new ListPartsCommand({ Bucket: B, Key: "parts/other.png", UploadId })))).toBe("404 NoSuchUpload");
    await s3.send(new AbortMultipartUploadCommand({ Bucket: B, Key: key, UploadId }));
    expect(await failure(s3.send(new ListPartsCommand({ Bucket: B, Key: key, UploadId })))).toBe("404 NoSuchUpload");
  });
});

describe("partNumber", () => {
  test("part 1 is the whole object (206 with its Content-Range); part 2 is 416 InvalidPartNumber; with Range it is 400", async () => {
    const got = await s3.send(new GetObjectCommand({ Bucket: B, Key: "r/a.jpg", PartNumber: 1 }));
    expect([got.$metadata.httpStatusCode, got.ContentRange, got.PartsCount]).toEqual([206, `bytes 0-${jpeg.length - 1}/${jpeg.length}`, undefined]);
    expect(md5(await got.Body!.transformToByteArray())).toBe(md5(jpeg));
    const head = await s3.send(new HeadObjectCommand({ Bucket: B, Key: "r/a.jpg", PartNumber: 1 }));
    expect([head.$metadata.httpStatusCode, head.ContentLength]).toEqual([206, jpeg.length]);
    expect(await failure(s3.send(new GetObjectCommand({ Bucket: B, Key: "r/a.jpg", PartNumber: 2 })))).toBe("416 InvalidPartNumber");
    expect(await failure(s3.send(new GetObjectCommand({ Bucket: B, Key: "r/a.jpg", PartNumber: 1, Range: "bytes=0-9" })))).toBe("400 InvalidRequest");
    expect((await signedRequest(f, "GET", "/s3/kura/r/a.jpg?partNumber=0")).status).toBe(400);
  });
});

describe("response-* overrides", () => {
  test("a signed GET sets Content-Type, Content-Disposition, Cache-Control, Content-Language and Expires as asked", async () => {
    const got = await s3.send(
      new GetObjectCommand({
        Bucket: B,
        Key: "r/a.jpg",
        ResponseContentType: "application/octet-stream",
        ResponseContentDisposition: `attachment; filename="a b.jpg"; filename*=UTF-8''%E5%9B%BE.jpg`,
        ResponseCacheControl: "no-cache",
        ResponseContentLanguage: "zh-CN",
        ResponseExpires: new Date("2030-01-01T00:00:00Z"),
      }),
    );
    expect([got.ContentType, got.ContentDisposition, got.CacheControl, got.ContentLanguage, got.ExpiresString]).toEqual([
      "application/octet-stream",
      `attachment; filename="a b.jpg"; filename*=UTF-8''%E5%9B%BE.jpg`,
      "no-cache",
      "zh-CN",
      "Tue, 01 Jan 2030 00:00:00 GMT",
    ]);
    expect(md5(await got.Body!.transformToByteArray())).toBe(md5(jpeg));
    const head = await s3.send(new HeadObjectCommand({ Bucket: B, Key: "r/a.jpg", ResponseContentType: "image/png" }));
    expect(head.ContentType).toBe("image/png");
  });

  test("a type a browser would run (HTML, SVG, script) or a header-breaking value is refused with 400 InvalidArgument", async () => {
    for (const type of ["text/html", "image/svg+xml", "application/javascript", "text/plain", "application/xhtml+xml", " image/svg+xml"]) {
      const res = await signedRequest(f, "GET", `/s3/kura/r/a.jpg?response-content-type=${encodeURIComponent(type)}`);
      expect([type, res.status, res.headers.get("content-type")]).toEqual([type, 400, "application/xml"]);
    }
    const broken = await signedRequest(f, "GET", `/s3/kura/r/a.jpg?response-content-disposition=${encodeURIComponent("inline\r\nX-Evil: 1")}`);
    expect([broken.status, broken.headers.get("x-evil")]).toEqual([400, null]);
    const raw = await signedRequest(f, "GET", `/s3/kura/r/a.jpg?response-content-disposition=${encodeURIComponent('attachment; filename="图.jpg"')}`);
    expect(raw.status).toBe(400);
  });
});
