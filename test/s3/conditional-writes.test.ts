/**
 * Conditional writes and the multipart ETag, as S3 answers them (client protocol audit LOW-4, -6, -9):
 * - PutObject / CompleteMultipartUpload / CopyObject with `If-None-Match: *` or `If-Match` are refused
 *   (412, 404 for If-Match on a free key) and write nothing; concurrent `If-None-Match: *` writes of one
 *   key: exactly one wins, checked again in the commit.
 * - The ETag CompleteMultipartUpload answers is the object's ETag on HEAD, GET, in listings and for
 *   conditions; a copy is a new single-part object with the plain MD5.
 * - Complete's `<Location>` is an absolute URL with the key percent-encoded.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import {
  CompleteMultipartUploadCommand,
  CopyObjectCommand,
  CreateMultipartUploadCommand,
  GetObjectCommand,
  HeadObjectCommand,
  ListObjectsV2Command,
  PutObjectCommand,
  UploadPartCommand,
  type S3Client,
} from "@aws-sdk/client-s3";
import { createHash } from "node:crypto";
import { makeJpeg, noisePng } from "../helpers/images";
import { sdkClient, signedRequest, startS3Fixture, type S3Fixture } from "./s3-setup";

const md5 = (b: Uint8Array) => createHash("md5").update(b).digest("hex");

let f: S3Fixture;
let s3: S3Client;
const B = "kura";
const path = (key: string) => `/s3/${B}/${key.split("/").map(encodeURIComponent).join("/")}`;
const imageCount = async () => (await f.admin.json("GET", "/api/admin/images?page_size=1")).total as number;
const bytesAt = async (key: string) => {
  const res = await signedRequest(f, "GET", path(key));
  return res.status === 200 ? md5(new Uint8Array(await res.arrayBuffer())) : res.status;
};
const put = (key: string, body: Uint8Array, headers: Record<string, string> = {}) =>
  signedRequest(f, "PUT", path(key), { body, headers: { "content-type": "image/jpeg", ...headers } });
const code = async (res: Response) => /<Code>([^<]+)<\/Code>/.exec(await res.text())?.[1];

beforeAll(async () => {
  f = await startS3Fixture({ upload_rate_per_min: 1_000_000, max_concurrent_uploads: 500 });
  s3 = sdkClient(f.cred);
});
afterAll(() => f.server.dispose());

describe("PutObject conditions", () => {
  test("If-None-Match: * writes a free key and refuses a taken one with 412; nothing changes", async () => {
    const [a, b] = await Promise.all([makeJpeg(40, 30, 7101), makeJpeg(40, 30, 7102)]);
    expect((await put("cond/new.jpg", a, { "if-none-match": "*" })).status).toBe(200);
    const count = await imageCount();
    const refused = await put("cond/new.jpg", b, { "if-none-match": "*" });
    expect([refused.status, await code(refused)]).toEqual([412, "PreconditionFailed"]);
    expect(await bytesAt("cond/new.jpg")).toBe(md5(a));
    expect(await imageCount()).toBe(count);
    // The SDK's own parameter, as an app would send it.
    const sdk = await s3.send(new PutObjectCommand({ Bucket: B, Key: "cond/new.jpg", Body: b, IfNoneMatch: "*" })).catch((e: { name: string }) => e.name);
    expect(sdk).toBe("PreconditionFailed");
  });

  test("If-Match: the current ETag overwrites; another ETag is 412, a free key 404 NoSuchKey; If-None-Match other than * is 501", async () => {
    const [a, b, c] = await Promise.all([makeJpeg(40, 30, 7111), makeJpeg(40, 30, 7112), makeJpeg(40, 30, 7113)]);
    await put("cond/m.jpg", a);
    const wrong = await put("cond/m.jpg", b, { "if-match": `"${md5(b)}"` });
    expect([wrong.status, await code(wrong)]).toEqual([412, "PreconditionFailed"]);
    expect(await bytesAt("cond/m.jpg")).toBe(md5(a));
    const missing = await put("cond/none.jpg", b, { "if-match": `"${md5(a)}"` });
    expect([missing.status, await code(missing)]).toEqual([404, "NoSuchKey"]);
    expect(await bytesAt("cond/none.jpg")).toBe(404);
    const tagged = await put("cond/m.jpg", b, { "if-none-match": `"${md5(a)}"` });
    expect([tagged.status, await code(tagged)]).toEqual([501, "NotImplemented"]);
    const ok = await put("cond/m.jpg", c, { "if-match": `"${md5(a)}"` });
    expect([ok.status, ok.headers.get("etag")]).toEqual([200, `"${md5(c)}"`]);
    expect(await bytesAt("cond/m.jpg")).toBe(md5(c));
  });

  test("concurrent If-None-Match: * writes of one key: exactly one is stored, every other is 412", async () => {
    const bodies = await Promise.all(Array.from({ length: 6 }, (_, i) => makeJpeg(40, 30, 7200 + i)));
    for (const key of ["race/a.jpg", "race/b.jpg", "race/c.jpg"]) {
      const answers = await Promise.all(bodies.map((body) => put(key, body, { "if-none-match": "*" })));
      const won = answers.flatMap((res, i) => (res.status === 200 ? [i] : []));
      expect(won.length).toBe(1);
      expect(answers.filter((res) => res.status === 412).length).toBe(bodies.length - 1);
      expect(await bytesAt(key)).toBe(md5(bodies[won[0]!]!));
    }
  });
});

describe("multipart", () => {
  /** Uploads `png` in two parts under `key`; resolves the upload id and the parts to complete with. */
  async function stage(key: string, png: Buffer) {
    const { UploadId } = await s3.send(new CreateMultipartUploadCommand({ Bucket: B, Key: key, ContentType: "image/png" }));
    const half = Math.ceil(png.length / 2);
    const pieces = [png.subarray(0, half), png.subarray(half)];
    const Parts = [];
    for (const [i, piece] of pieces.entries()) {
      const part = await s3.send(new UploadPartCommand({ Bucket: B, Key: key, UploadId, PartNumber: i + 1, Body: piece }));
      Parts.push({ ETag: part.ETag, PartNumber: i + 1 });
    }
    const etag = `"${md5(Buffer.concat(pieces.map((p) => Buffer.from(md5(p), "hex"))))}-2"`;
    return { UploadId: UploadId!, Parts, etag };
  }

  test("the Complete ETag is the object's ETag on HEAD, GET, in listings and for If-Match; a copy has the plain MD5", async () => {
    const png = await noisePng(600);
    const key = "mp/大 图 #1.png";
    const { UploadId, Parts, etag } = await stage(key, png);
    const done = await s3.send(new CompleteMultipartUploadCommand({ Bucket: B, Key: key, UploadId, MultipartUpload: { Parts } }));
    expect(done.ETag).toBe(etag);
    expect(done.Location).toBe(`${f.server.base}/s3/${B}/mp/${encodeURIComponent("大 图 #1.png")}`);
    expect((await s3.send(new HeadObjectCommand({ Bucket: B, Key: key }))).ETag).toBe(etag);
    const got = await s3.send(new GetObjectCommand({ Bucket: B, Key: key, IfMatch: etag }));
    expect([got.ETag, md5(await got.Body!.transformToByteArray())]).toEqual([etag, md5(png)]);
    const listed = await s3.send(new ListObjectsV2Command({ Bucket: B, Prefix: "mp/" }));
    expect(listed.Contents?.map((o) => [o.Key, o.ETag])).toEqual([[key, etag]]);
    const copied = await s3.send(
      new CopyObjectCommand({ Bucket: B, Key: "mp/copy.png", CopySource: `${B}/${encodeURIComponent(key)}`, CopySourceIfMatch: etag }),
    );
    expect(copied.CopyObjectResult?.ETag).toBe(`"${md5(png)}"`);
    expect((await s3.send(new HeadObjectCommand({ Bucket: B, Key: "mp/copy.png" }))).ETag).toBe(`"${md5(png)}"`);
    // Metadata rewritten in place (rclone's mtime fix) makes a new single-part object too.
    await s3.send(
      new CopyObjectCommand({ Bucket: B, Key: key, CopySource: `${B}/${encodeURIComponent(key)}`, MetadataDirective: "REPLACE", Metadata: { mtime: "1" } }),
    );
    const rewritten = await s3.send(new HeadObjectCommand({ Bucket: B, Key: key }));
    expect([rewritten.ETag, rewritten.Metadata]).toEqual([`"${md5(png)}"`, { mtime: "1" }]);
  }, 60_000);

  test("Complete with If-None-Match: * onto a taken key is 412: the key keeps its object, the upload stays open for a retry", async () => {
    const [jpeg, png] = await Promise.all([makeJpeg(40, 30, 7301), noisePng(300)]);
    await put("mp/taken.png", jpeg);
    const { UploadId, Parts } = await stage("mp/taken.png", png);
    const complete = () =>
      s3.send(new CompleteMultipartUploadCommand({ Bucket: B, Key: "mp/taken.png", UploadId, MultipartUpload: { Parts }, IfNoneMatch: "*" }));
    expect(await complete().catch((e: { name: string }) => e.name)).toBe("PreconditionFailed");
    expect(await bytesAt("mp/taken.png")).toBe(md5(jpeg));
    const done = await s3.send(
      new CompleteMultipartUploadCommand({ Bucket: B, Key: "mp/taken.png", UploadId, MultipartUpload: { Parts }, IfMatch: `"${md5(jpeg)}"` }),
    );
    expect(done.ETag).toMatch(/-2"$/);
    expect(await bytesAt("mp/taken.png")).toBe(md5(png));
  }, 60_000);
});

test("CopyObject with If-None-Match: * onto a taken key is 412 and copies nothing", async () => {
  const [a, b] = await Promise.all([makeJpeg(40, 30, 7401), makeJpeg(40, 30, 7402)]);
  await put("copy/src.jpg", a);
  await put("copy/dst.jpg", b);
  const count = await imageCount();
  const refused = await signedRequest(f, "PUT", path("copy/dst.jpg"), { headers: { "x-amz-copy-source": `${B}/copy/src.jpg`, "if-none-match": "*" } });
  expect([refused.status, await code(refused)]).toEqual([412, "PreconditionFailed"]);
  expect(await bytesAt("copy/dst.jpg")).toBe(md5(b));
  expect(await imageCount()).toBe(count);
  const copied = await signedRequest(f, "PUT", path("copy/free.jpg"), { headers: { "x-amz-copy-source": `${B}/copy/src.jpg`, "if-none-match": "*" } });
  expect(copied.status).toBe(200);
  expect(await bytesAt("copy/free.jpg")).toBe(md5(a));
});
