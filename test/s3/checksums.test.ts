/**
 * Every checksum a client sends with an upload is verified. CRC64NVME (header or aws-chunked
 * trailer) is computed like CRC32: a wrong value is 400 BadDigest and nothing is stored, a right one
 * stores the bytes as sent (ETag = MD5). An aws-chunked body whose trailers were not declared in
 * `x-amz-trailer` is refused (S3: MalformedTrailerError), and a declared trailer Kura cannot compute
 * is refused up front (InvalidRequest) instead of being required but never checked. Black-box against
 * a real Kura (raw SigV4 and the real AWS SDK v3), plus the CRC64-NVME calculator against published
 * check values and the AWS SDK's own implementation.
 */
import { Crc64NvmeJs } from "@aws-sdk/checksums/crc";
import { GetObjectCommand, PutObjectCommand } from "@aws-sdk/client-s3";
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import fc from "fast-check";
import { createHash } from "node:crypto";
import { readdirSync } from "node:fs";
import { join } from "node:path";
import { Readable } from "node:stream";
import { checksumCalculator } from "../../src/s3/checksums";
import { makePng, sha256 } from "../helpers/images";
import { queryDb } from "../http/channels.helpers";
import { errorCodeOf as codeOf, sdkClient, startS3Fixture, type S3Fixture } from "./s3-setup";
import { signedS3 } from "./signed-request";

const crc64 = (...pieces: Uint8Array[]) => {
  const calc = checksumCalculator("x-amz-checksum-crc64nvme")!;
  for (const piece of pieces) calc.update(piece);
  return calc.digestBase64();
};
const b64 = (hex: string) => Buffer.from(hex, "hex").toString("base64");
const md5 = (b: Uint8Array) => createHash("md5").update(b).digest("hex");

describe("CRC64-NVME calculator", () => {
  const fill = (f: (i: number) => number) => Uint8Array.from({ length: 4096 }, (_, i) => f(i));
  const vectors: [string, Uint8Array, string][] = [
    ["RevEng check value, '123456789'", Buffer.from("123456789"), "ae8b14860a799888"],
    ["NVMe NVM Command Set 1.0a §5.2.1.3.5: 4 KiB of 0x00", fill(() => 0), "6482d367eb22b64e"],
    ["NVMe: 4 KiB of 0xFF", fill(() => 0xff), "c0ddba7302eca3ac"],
    ["NVMe: 4 KiB incrementing", fill((i) => i & 0xff), "3e729f5f6750449c"],
    ["NVMe: 4 KiB decrementing", fill((i) => 0xff - (i & 0xff)), "9a2df64b8e9e517e"],
    ["aws-c-checksums: 32 zero bytes", new Uint8Array(32), "cf3473434d4ecf3b"],
    ["aws-c-s3: 'aaaaaaaaaa'", Buffer.from("aaaaaaaaaa"), "0c1a80036d65c555"],
    ["empty body", new Uint8Array(0), "0000000000000000"],
  ];
  test.each(vectors)("%s", (_, data, hex) => {
    expect(crc64(data)).toBe(b64(hex));
  });

  test("equals the AWS SDK's Crc64NvmeJs for random bytes fed in random pieces (fast-check, fixed seed)", async () => {
    await fc.assert(
      fc.asyncProperty(fc.uint8Array({ maxLength: 3000 }), fc.array(fc.nat(3000), { maxLength: 6 }), async (data, cuts) => {
        const points = [...new Set(cuts.map((c) => c % (data.length + 1)))].sort((a, b) => a - b);
        const pieces = [0, ...points].map((start, i) => data.subarray(start, [...points, data.length][i]));
        const reference = new Crc64NvmeJs();
        reference.update(data);
        expect(crc64(...pieces)).toBe(Buffer.from(await reference.digest()).toString("base64"));
      }),
      { seed: 20261127, numRuns: 300 },
    );
  });
});

describe("S3 upload checksums", () => {
  let f: S3Fixture;
  let png: Buffer;
  const put = (key: string, body: Uint8Array, headers: Record<string, string>) => signedS3(f.server.base, f.cred, "PUT", `/s3/kura/${key}`, { body, headers });

  /** Nothing of `key` was kept: no alias, no image or blob row for it, no staging file. */
  function expectNothingStored(key: string, imagesBefore: number, blobsBefore: number) {
    expect(queryDb(f.server, "SELECT id FROM images WHERE object_key = ?", key)).toEqual([]);
    expect(queryDb<{ n: number }>(f.server, "SELECT count(*) AS n FROM images")[0]!.n).toBe(imagesBefore);
    expect(queryDb<{ n: number }>(f.server, "SELECT count(*) AS n FROM blobs")[0]!.n).toBe(blobsBefore);
    expect(readdirSync(join(f.server.dataDir, "tmp"))).toEqual([]);
  }
  const counts = () =>
    [
      queryDb<{ n: number }>(f.server, "SELECT count(*) AS n FROM images")[0]!.n,
      queryDb<{ n: number }>(f.server, "SELECT count(*) AS n FROM blobs")[0]!.n,
    ] as const;

  /** The stored bytes of `key` (GET) are exactly `bytes`, and the ETag is their MD5. */
  async function expectStored(key: string, bytes: Uint8Array) {
    const got = await signedS3(f.server.base, f.cred, "GET", `/s3/kura/${key}`);
    expect(got.status).toBe(200);
    expect(got.headers.get("etag")).toBe(`"${md5(bytes)}"`);
    expect(sha256(await got.arrayBuffer())).toBe(sha256(bytes));
  }

  /** An unsigned aws-chunked body (as the SDK frames streams): chunks of `size`, then the trailer line, if any. */
  function chunked(data: Uint8Array, trailer: string, size = 700): Uint8Array {
    const parts: Buffer[] = [];
    for (let i = 0; i < data.length; i += size) {
      const piece = data.subarray(i, i + size);
      parts.push(Buffer.from(`${piece.length.toString(16)}\r\n`), Buffer.from(piece), Buffer.from("\r\n"));
    }
    parts.push(Buffer.from(`0\r\n${trailer ? `${trailer}\r\n` : ""}\r\n`));
    return new Uint8Array(Buffer.concat(parts));
  }
  const streamingHeaders = (decoded: number, trailerHeader?: string): Record<string, string> => ({
    "x-amz-content-sha256": "STREAMING-UNSIGNED-PAYLOAD-TRAILER",
    "content-encoding": "aws-chunked",
    "x-amz-decoded-content-length": String(decoded),
    ...(trailerHeader ? { "x-amz-trailer": trailerHeader } : {}),
  });

  beforeAll(async () => {
    f = await startS3Fixture();
    png = await makePng(60, 40, 7);
  });
  afterAll(() => f.server.dispose());

  test("x-amz-checksum-crc64nvme header: a wrong value is 400 BadDigest and stores nothing; the right one stores the bytes as sent", async () => {
    const [images, blobs] = counts();
    const bad = await put("hdr.png", png, { "x-amz-checksum-crc64nvme": b64("0000000000000001"), "x-amz-sdk-checksum-algorithm": "CRC64NVME" });
    const xml = await bad.text();
    expect([bad.status, codeOf(xml)]).toEqual([400, "BadDigest"]);
    expect(xml).toMatch(/<Message>[^<]*[\u4e00-\u9fff]/);
    expectNothingStored("hdr.png", images, blobs);

    const good = await put("hdr.png", png, { "x-amz-checksum-crc64nvme": crc64(png), "x-amz-sdk-checksum-algorithm": "CRC64NVME" });
    expect([good.status, good.headers.get("etag")]).toEqual([200, `"${md5(png)}"`]);
    await expectStored("hdr.png", png);
  });

  test("x-amz-checksum-crc64nvme trailer: a wrong value is 400 BadDigest and stores nothing; the right one stores the decoded bytes", async () => {
    const headers = streamingHeaders(png.length, "x-amz-checksum-crc64nvme");
    const [images, blobs] = counts();
    const bad = await put("trl.png", chunked(png, `x-amz-checksum-crc64nvme:${b64("0000000000000001")}`), headers);
    expect([bad.status, codeOf(await bad.text())]).toEqual([400, "BadDigest"]);
    expectNothingStored("trl.png", images, blobs);

    const good = await put("trl.png", chunked(png, `x-amz-checksum-crc64nvme:${crc64(png)}`), headers);
    expect([good.status, good.headers.get("etag")]).toEqual([200, `"${md5(png)}"`]);
    await expectStored("trl.png", png);
  });

  test("a checksum trailer without x-amz-trailer is 400 MalformedTrailerError and stores nothing; the same body with no trailer is accepted", async () => {
    const [images, blobs] = counts();
    // A wrong CRC32 that would have been BadDigest had it been declared.
    const bad = await put("undeclared.png", chunked(png, "x-amz-checksum-crc32:AAAAAA=="), streamingHeaders(png.length));
    expect([bad.status, codeOf(await bad.text())]).toEqual([400, "MalformedTrailerError"]);
    expectNothingStored("undeclared.png", images, blobs);

    // S3 accepts this mode with neither x-amz-trailer nor trailer lines: nothing was promised.
    const plain = await put("undeclared.png", chunked(png, ""), streamingHeaders(png.length));
    expect(plain.status).toBe(200);
    await expectStored("undeclared.png", png);
  });

  test("a declared trailer Kura cannot verify is 400 InvalidRequest, even with trailer lines that would otherwise be accepted", async () => {
    const [images, blobs] = counts();
    const res = await put(
      "md5trailer.png",
      chunked(png, `x-amz-checksum-md5:${createHash("md5").update(png).digest("base64")}`),
      streamingHeaders(png.length, "x-amz-checksum-md5"),
    );
    const xml = await res.text();
    expect([res.status, codeOf(xml)]).toEqual([400, "InvalidRequest"]);
    expect(xml).toContain("x-amz-checksum-md5");
    expectNothingStored("md5trailer.png", images, blobs);
  });

  test("the AWS SDK v3 with ChecksumAlgorithm CRC64NVME (header for a buffer, trailer for a stream) uploads; a wrong ChecksumCRC64NVME is BadDigest", async () => {
    const s3 = sdkClient(f.cred);
    const sent: Record<string, string>[] = [];
    s3.middlewareStack.add(
      (next) => async (args) => {
        sent.push({ ...(args.request as { headers: Record<string, string> }).headers });
        return next(args);
      },
      { step: "finalizeRequest", name: "recordHeaders" },
    );
    const buffer = await s3.send(new PutObjectCommand({ Bucket: "kura", Key: "sdk/buf.png", Body: png, ChecksumAlgorithm: "CRC64NVME" }));
    expect(buffer.ETag).toBe(`"${md5(png)}"`);
    expect(sent.at(-1)!["x-amz-checksum-crc64nvme"]).toBe(crc64(png));

    const stream = Readable.from([png.subarray(0, 1000), png.subarray(1000)]);
    const streamed = await s3.send(
      new PutObjectCommand({ Bucket: "kura", Key: "sdk/stream.png", Body: stream, ContentLength: png.length, ChecksumAlgorithm: "CRC64NVME" }),
    );
    expect(streamed.ETag).toBe(`"${md5(png)}"`);
    expect(sent.at(-1)!["x-amz-trailer"]).toBe("x-amz-checksum-crc64nvme");
    for (const key of ["sdk/buf.png", "sdk/stream.png"]) {
      const got = await s3.send(new GetObjectCommand({ Bucket: "kura", Key: key }));
      expect(sha256(await got.Body!.transformToByteArray())).toBe(sha256(png));
    }

    const [images, blobs] = counts();
    const err = await s3.send(new PutObjectCommand({ Bucket: "kura", Key: "sdk/wrong.png", Body: png, ChecksumCRC64NVME: b64("0000000000000001") })).then(
      () => undefined,
      (e: { name: string; $metadata?: { httpStatusCode?: number } }) => e,
    );
    expect([err?.name, err?.$metadata?.httpStatusCode]).toEqual(["BadDigest", 400]);
    expectNothingStored("sdk/wrong.png", images, blobs);
  });
});

describe("CompleteMultipartUpload checksums describe the object, not the XML", () => {
  let f: S3Fixture;
  let png: Buffer;
  beforeAll(async () => {
    f = await startS3Fixture();
    png = await makePng(300, 200, 77);
  });
  afterAll(() => f.server.dispose());

  const crc32 = (bytes: Uint8Array) => {
    const calc = checksumCalculator("x-amz-checksum-crc32")!;
    calc.update(bytes);
    return calc.digestBase64();
  };
  const s3 = (method: string, path: string, body?: Uint8Array, headers: Record<string, string> = {}) =>
    signedS3(f.server.base, f.cred, method, `/s3/kura/${path}`, { body, headers });

  /** An upload of `png` in two parts, ready to complete: its id and the Complete body. */
  async function twoParts(key: string) {
    const id = /<UploadId>(\w+)<\/UploadId>/.exec(await (await s3("POST", `${key}?uploads=`)).text())![1]!;
    const halves = [png.subarray(0, 1000), png.subarray(1000)];
    const tags: string[] = [];
    for (const [i, half] of halves.entries()) {
      const res = await s3("PUT", `${key}?partNumber=${i + 1}&uploadId=${id}`, half);
      expect(res.status).toBe(200);
      tags.push(res.headers.get("etag")!);
    }
    const xml = new TextEncoder().encode(
      `<CompleteMultipartUpload>${tags.map((t, i) => `<Part><PartNumber>${i + 1}</PartNumber><ETag>${t}</ETag></Part>`).join("")}</CompleteMultipartUpload>`,
    );
    return { id, complete: (headers: Record<string, string>) => s3("POST", `${key}?uploadId=${id}`, xml, headers) };
  }

  test("a full-object CRC32 of the assembled bytes completes (before, it was checked against the XML and failed)", async () => {
    const { complete } = await twoParts("mp/right.png");
    const res = await complete({ "x-amz-checksum-crc32": crc32(png), "x-amz-checksum-type": "FULL_OBJECT" });
    expect(res.status).toBe(200);
    const got = await s3("GET", "mp/right.png");
    expect(sha256(await got.arrayBuffer())).toBe(sha256(png));
  });

  test("a wrong full-object checksum is BadDigest, stores nothing, and the upload can still complete", async () => {
    const { complete } = await twoParts("mp/wrong.png");
    const res = await complete({ "x-amz-checksum-crc32": crc32(Buffer.from("not the object")), "x-amz-checksum-type": "FULL_OBJECT" });
    expect(res.status).toBe(400);
    expect(codeOf(await res.text())).toBe("BadDigest");
    expect((await s3("HEAD", "mp/wrong.png")).status).toBe(404);
    expect(readdirSync(join(f.server.dataDir, "tmp")).filter((n) => n !== "multipart")).toEqual([]);
    expect((await complete({})).status).toBe(200);
  });

  test("a composite checksum (a checksum of the parts' checksums, `<base64>-<parts>`) is not mistaken for the object's", async () => {
    const { complete } = await twoParts("mp/composite.png");
    const res = await complete({ "x-amz-checksum-crc32": `${crc32(Buffer.from("parts"))}-2` });
    expect(res.status).toBe(200);
  });
});
