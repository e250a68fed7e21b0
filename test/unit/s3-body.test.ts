/**
 * The S3 body path in-process (written to kill the mutants `bun run mutate s3-body` left): size caps
 * before and while reading, every digest the client committed to (x-amz-content-sha256, Content-MD5,
 * x-amz-checksum-*), the staging file's mode and removal, and the XML body limit.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { createHash } from "node:crypto";
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { consumeBody, MAX_XML_BODY, readXmlBody, receiveToFile } from "../../src/s3/body.ts";
import { S3Error } from "../../src/s3/errors.ts";
import type { S3Request } from "../../src/s3/request.ts";

const dir = mkdtempSync(join(tmpdir(), "kura-s3-body-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const hex = (algo: string, b: Uint8Array) => createHash(algo).update(b).digest("hex");
const b64 = (algo: string, b: Uint8Array) => createHash(algo).update(b).digest("base64");
const BODY = new Uint8Array(5000).map((_, i) => (i * 7 + 3) & 0xff);

/** A request whose body arrives in `chunk`-sized pieces, as a network body does. */
function s3req(
  body: Uint8Array | null,
  headers: Record<string, string> = {},
  auth: { payloadMode?: string; payloadHash?: string; decodedContentLength?: number } = {},
  chunk = 1000,
): S3Request {
  const stream =
    body &&
    new ReadableStream<Uint8Array>({
      start(c) {
        for (let i = 0; i < body.length; i += chunk) c.enqueue(body.slice(i, i + chunk));
        c.close();
      },
    });
  const request = new Request("http://kura.test/s3/kura/a.jpg", { method: "PUT", headers, body: stream, duplex: "half" } as RequestInit);
  return { request, idleMs: 60_000, auth: { payloadMode: "UNSIGNED-PAYLOAD", payloadHash: "UNSIGNED-PAYLOAD", ...auth } } as unknown as S3Request;
}

async function failure(p: Promise<unknown>): Promise<string> {
  const err = await p.then(
    () => undefined,
    (e) => e,
  );
  if (!(err instanceof S3Error) && !(err instanceof Error)) return "no error";
  return `${(err as S3Error).code ?? "Error"}:${err.message}`;
}

const collect = () => {
  const chunks: Uint8Array[] = [];
  return { chunks, sink: (c: Uint8Array) => void chunks.push(c) };
};

describe("consumeBody", () => {
  test("returns size, md5 and sha256 of the exact bytes and hands every byte to the sink", async () => {
    const { chunks, sink } = collect();
    const d = await consumeBody(s3req(BODY), 1_000_000, sink);
    expect(d).toEqual({ size: BODY.length, md5: hex("md5", BODY), sha256: hex("sha256", BODY) });
    expect(Buffer.concat(chunks).equals(Buffer.from(BODY))).toBe(true);
    expect(await consumeBody(s3req(null), 10, () => {})).toEqual({ size: 0, md5: hex("md5", new Uint8Array(0)), sha256: hex("sha256", new Uint8Array(0)) });
  });

  test("the signed sha256 is checked for hex payloads only", async () => {
    const right = hex("sha256", BODY);
    expect((await consumeBody(s3req(BODY, {}, { payloadMode: "sha256", payloadHash: right }), 1e6, () => {})).size).toBe(BODY.length);
    expect((await consumeBody(s3req(BODY, {}, { payloadMode: "sha256", payloadHash: right.toUpperCase() }), 1e6, () => {})).size).toBe(BODY.length);
    expect(await failure(consumeBody(s3req(BODY, {}, { payloadMode: "sha256", payloadHash: hex("sha256", BODY.slice(1)) }), 1e6, () => {}))).toBe(
      "XAmzContentSHA256Mismatch:请求体的 SHA-256 与 x-amz-content-sha256 不一致",
    );
    // UNSIGNED-PAYLOAD commits to nothing.
    expect((await consumeBody(s3req(BODY, {}, { payloadMode: "UNSIGNED-PAYLOAD", payloadHash: "0".repeat(64) }), 1e6, () => {})).size).toBe(BODY.length);
  });

  test("the cap: a declared length above it reads nothing; an undeclared body stops when it crosses it", async () => {
    const TOO_LARGE = "EntityTooLarge:图片超过大小上限（1 MB）";
    let pulled = 0;
    const declared = s3req(BODY, { "content-length": String(2 * 1048576) });
    const { sink } = collect();
    expect(await failure(consumeBody(declared, 1048576, (c) => void (pulled += c.length)))).toBe(TOO_LARGE);
    expect(pulled).toBe(0);
    // Bun joins a duplicated Content-Length as "n, n": the first value counts.
    expect(await failure(consumeBody(s3req(BODY, { "content-length": "2097152, 2097152" }), 1048576, sink))).toBe(TOO_LARGE);
    expect(await failure(consumeBody(s3req(BODY, {}, { decodedContentLength: 2097152 }), 1048576, sink))).toBe(TOO_LARGE);
    // The decoded length wins over the (larger, framed) Content-Length.
    expect((await consumeBody(s3req(BODY, { "content-length": "9999999" }, { decodedContentLength: BODY.length }), BODY.length, () => {})).size).toBe(
      BODY.length,
    );
    expect((await consumeBody(s3req(BODY, { "content-length": "abc" }), BODY.length, () => {})).size).toBe(BODY.length);
    expect((await consumeBody(s3req(BODY), BODY.length, () => {})).size).toBe(BODY.length);
    const seen: number[] = [];
    expect(await failure(consumeBody(s3req(BODY), BODY.length - 1, (c) => void seen.push(c.length)))).toBe("EntityTooLarge:图片超过大小上限（0 MB）");
    expect(seen.reduce((a, b) => a + b, 0)).toBe(4000); // the crossing chunk is not handed on
  });

  test("Content-MD5 and x-amz-checksum-* headers must match the bytes", async () => {
    const ok = (headers: Record<string, string>) => consumeBody(s3req(BODY, headers), 1e6, () => {}).then((d) => d.size);
    expect(await ok({ "content-md5": ` ${b64("md5", BODY)} ` })).toBe(BODY.length);
    expect(await failure(ok({ "content-md5": b64("md5", BODY.slice(1)) }))).toBe("BadDigest:请求体的 MD5 与 Content-MD5 不一致");
    expect(await ok({ "x-amz-checksum-sha256": b64("sha256", BODY), "x-amz-checksum-sha1": b64("sha1", BODY) })).toBe(BODY.length);
    expect(await failure(ok({ "x-amz-checksum-sha256": b64("sha256", BODY.slice(1)) }))).toBe("BadDigest:请求体的校验值与 x-amz-checksum-sha256 不一致");
    expect(await failure(ok({ "x-amz-checksum-sha1": ` ${b64("sha1", BODY.slice(1))}` }))).toBe("BadDigest:请求体的校验值与 x-amz-checksum-sha1 不一致");
    // Mode, algorithm and type headers are not checksums; CRC64NVME is verified like the others.
    expect(await ok({ "x-amz-checksum-mode": "ENABLED", "x-amz-checksum-algorithm": "SHA256", "x-amz-checksum-type": "FULL_OBJECT" })).toBe(BODY.length);
    expect(await failure(ok({ "x-amz-checksum-crc64nvme": "AAAAAAAAAAA=" }))).toBe("BadDigest:请求体的校验值与 x-amz-checksum-crc64nvme 不一致");
  });
});

describe("receiveToFile and readXmlBody", () => {
  test("the staging file holds the bytes with mode 0600, and is removed on any failure", async () => {
    const path = join(dir, "ok.bin");
    const d = await receiveToFile(s3req(BODY), path, 1e6);
    expect(d.size).toBe(BODY.length);
    expect(readFileSync(path).equals(Buffer.from(BODY))).toBe(true);
    expect(statSync(path).mode & 0o777).toBe(0o600);
    const bad = join(dir, "bad.bin");
    expect(await failure(receiveToFile(s3req(BODY, { "content-md5": "AAAAAAAAAAAAAAAAAAAAAA==" }), bad, 1e6))).toBe(
      "BadDigest:请求体的 MD5 与 Content-MD5 不一致",
    );
    expect(existsSync(bad)).toBe(false);
    const big = join(dir, "big.bin");
    expect(await failure(receiveToFile(s3req(BODY), big, 100))).toStartWith("EntityTooLarge:");
    expect(existsSync(big)).toBe(false);
  });

  test("XML bodies are read whole up to 1 MiB, verified like any other body", async () => {
    const xml = new TextEncoder().encode("<Delete><Object><Key>图.jpg</Key></Object></Delete>");
    expect(await readXmlBody(s3req(xml))).toBe("<Delete><Object><Key>图.jpg</Key></Object></Delete>");
    expect(MAX_XML_BODY).toBe(1024 * 1024);
    expect(await failure(readXmlBody(s3req(new Uint8Array(MAX_XML_BODY + 1), {}, {}, 65536)))).toBe("MalformedXML:XML 请求体过大");
    expect((await readXmlBody(s3req(new Uint8Array(MAX_XML_BODY).fill(32), {}, {}, 65536))).length).toBe(MAX_XML_BODY);
    expect(await failure(readXmlBody(s3req(xml, { "content-md5": "AAAAAAAAAAAAAAAAAAAAAA==" })))).toBe("BadDigest:请求体的 MD5 与 Content-MD5 不一致");
  });
});

describe("aws-chunked bodies", () => {
  const framed = (text: string, headers: Record<string, string>, auth: Record<string, unknown>) =>
    ({
      request: new Request("http://kura.test/s3/kura/a.jpg", { method: "PUT", headers, body: new TextEncoder().encode(text) }),
      auth,
    }) as unknown as S3Request;
  const sha = b64("sha256", new TextEncoder().encode("hello"));
  const SIGNED = { signingKey: Buffer.alloc(32), scope: `20260301/us-east-1/s3/aws4_request`, amzDate: "20260301T120000Z", seedSignature: "0".repeat(64) };

  test("the framing is removed and verified as the signed mode says, never for plain modes", async () => {
    const { chunks, sink } = collect();
    const trailer = `5\r\nhello\r\n0\r\nx-amz-checksum-sha256:${sha}\r\n\r\n`;
    const d = await consumeBody(
      framed(trailer, { "x-amz-trailer": "x-amz-checksum-sha256" }, { payloadMode: "STREAMING-UNSIGNED-PAYLOAD-TRAILER", decodedContentLength: 5 }),
      1e6,
      sink,
    );
    expect([d.size, Buffer.concat(chunks).toString()]).toEqual([5, "hello"]);
    expect(d.sha256).toBe(hex("sha256", new TextEncoder().encode("hello")));
    expect(
      await failure(
        consumeBody(
          framed(
            trailer.replace(sha, "AAAA"),
            { "x-amz-trailer": "x-amz-checksum-sha256" },
            { payloadMode: "STREAMING-UNSIGNED-PAYLOAD-TRAILER", decodedContentLength: 5 },
          ),
          1e6,
          () => {},
        ),
      ),
    ).toBe("BadDigest:x-amz-checksum-sha256 校验和与收到的数据不一致");
    const forged = `5;chunk-signature=${"0".repeat(64)}\r\nhello\r\n0;chunk-signature=${"0".repeat(64)}\r\n\r\n`;
    expect(
      await failure(consumeBody(framed(forged, {}, { payloadMode: "STREAMING-AWS4-HMAC-SHA256-PAYLOAD", decodedContentLength: 5, ...SIGNED }), 1e6, () => {})),
    ).toBe("SignatureDoesNotMatch:分块签名不匹配，数据可能被篡改");
    // The same bytes under a plain mode are the object itself.
    expect((await consumeBody(framed(trailer, {}, { payloadMode: "UNSIGNED-PAYLOAD" }), 1e6, () => {})).size).toBe(trailer.length);
  });
});
