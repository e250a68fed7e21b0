/**
 * Reading `/s3/` request bodies: picks the framing from the signed payload mode (raw, or aws-chunked
 * decoded and verified), enforces the size cap while reading (never buffering unbounded), hashes as it
 * goes and then checks every digest the client committed to (x-amz-content-sha256, Content-MD5,
 * x-amz-checksum-* headers).
 */
import { createHash } from "node:crypto";
import { open, rm } from "node:fs/promises";
import { S3Error, entityTooLarge } from "./errors";
import { decodeAwsChunked } from "./aws-chunked";
import { checksumCalculator, type ChecksumCalculator } from "./checksums";
import { assertPayloadDigest } from "./sigv4";
import type { S3Request } from "./request";
import { withIdleDeadline } from "../images/upload/body-deadline";
import { writeAll } from "../shared/write-all";
import { once } from "../shared/once";

export interface BodyDigests {
  size: number;
  /** hex */
  md5: string;
  /** hex */
  sha256: string;
}

/**
 * Signed aws-chunked bodies hold one chunk (up to 16 MiB) in memory until its signature checks out;
 * at most this many are decoded at once, so memory stays bounded (64 MiB) whatever the concurrency.
 */
export const MAX_SIGNED_CHUNK_STREAMS = 4;
let signedStreams = 0;

function admitSignedStream(req: S3Request): () => void {
  if (!req.auth.payloadMode.startsWith("STREAMING-AWS4-HMAC-SHA256-PAYLOAD")) return () => {};
  if (signedStreams >= MAX_SIGNED_CHUNK_STREAMS) {
    throw new S3Error("SlowDown", "同时进行的签名分块（aws-chunked）上传过多，请稍后重试", 503, { "retry-after": "1" });
  }
  signedStreams++;
  return once(() => signedStreams--);
}

/** XML request bodies (Complete, Delete) are small. */
export const MAX_XML_BODY = 1024 * 1024;

function declaredSize(req: S3Request): number | undefined {
  if (req.auth.decodedContentLength !== undefined) return req.auth.decodedContentLength;
  const raw = req.request.headers.get("content-length");
  if (raw === null) return undefined;
  // Bun joins a duplicated Content-Length (rclone presigned PUT) as "287, 287".
  const n = Number(raw.split(",")[0]!.trim());
  return Number.isFinite(n) ? n : undefined;
}

/**
 * Room for aws-chunked framing on top of the object bytes: a signed chunk's header is under 100
 * bytes, and every chunk but the last carries at least 8 KiB (S3's minimum), so well under 1/64.
 */
const framingAllowance = (maxBytes: number) => Math.ceil(maxBytes / 64) + 64 * 1024;

/**
 * The object bytes of the request: aws-chunked framing removed (and verified) when the mode says
 * so. The raw body is capped too, so framing alone (a stream of one-byte chunks) cannot make the
 * server read without end.
 */
function objectStream(req: S3Request, maxBytes: number): ReadableStream<Uint8Array> {
  // A client that stops sending holds an upload slot and a temp file: the same idle deadline as
  // every other upload surface (RequestTimeout, as S3 answers a body that stopped arriving).
  const cap = { bytes: maxBytes + framingAllowance(maxBytes), over: () => entityTooLarge(maxBytes) };
  const body = req.request.body ? withIdleDeadline(req.request.body, req.idleMs, cap) : new ReadableStream<Uint8Array>({ start: (c) => c.close() });
  const { auth } = req;
  if (!auth.payloadMode.startsWith("STREAMING-")) return body;
  const signed = auth.payloadMode.startsWith("STREAMING-AWS4-HMAC-SHA256-PAYLOAD")
    ? { signingKey: auth.signingKey, scope: auth.scope, amzDate: auth.amzDate, seedSignature: auth.seedSignature }
    : undefined;
  // Without x-amz-trailer no trailer is allowed (S3 requires the header whenever trailers are sent):
  // an undeclared checksum trailer would otherwise pass unchecked.
  const trailer = auth.payloadMode.endsWith("-TRAILER") ? (req.request.headers.get("x-amz-trailer") ?? false) : false;
  return decodeAwsChunked(body, { signed, trailerExpected: trailer, decodedLength: auth.decodedContentLength });
}

export interface HeaderChecksum {
  name: string;
  value: string;
  calc: ChecksumCalculator;
}

/** Checksum headers sent with a plain (non-trailer) body; verified after reading. */
export function headerChecksums(req: S3Request): HeaderChecksum[] {
  const out: HeaderChecksum[] = [];
  for (const [name, value] of req.request.headers) {
    if (!name.startsWith("x-amz-checksum-") || name === "x-amz-checksum-mode" || name === "x-amz-checksum-algorithm") continue;
    const calc = checksumCalculator(name);
    if (calc) out.push({ name, value: value.trim(), calc });
  }
  return out;
}

/**
 * Streams the body through `sink`, at most `maxBytes` object bytes (EntityTooLarge as soon as the cap
 * is crossed, nothing more read), then verifies the digests. `sink` is awaited per chunk (backpressure).
 */
export async function consumeBody(
  req: S3Request,
  maxBytes: number,
  sink: (chunk: Uint8Array) => Promise<void> | void,
  opts: { checksumsDescribeObject?: boolean } = {},
): Promise<BodyDigests> {
  const declared = declaredSize(req);
  if (declared !== undefined && declared > maxBytes) throw entityTooLarge(maxBytes);
  const md5 = createHash("md5");
  const sha256 = createHash("sha256");
  const checks = opts.checksumsDescribeObject ? [] : headerChecksums(req);
  // The raw body's sha256 is what x-amz-content-sha256 signs; for aws-chunked it is the framing's job.
  const rawHex = req.auth.payloadMode === "sha256";
  let size = 0;
  // The decoder refuses an unsupported x-amz-trailer when it is made: before admission, so that a
  // refusal cannot hold a signed-stream slot.
  const stream = objectStream(req, maxBytes);
  const release = admitSignedStream(req);
  const reader = stream.getReader();
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      size += value.length;
      if (size > maxBytes) throw entityTooLarge(maxBytes);
      md5.update(value);
      sha256.update(value);
      for (const c of checks) c.calc.update(value);
      await sink(value);
    }
  } catch (err) {
    await reader.cancel().catch(() => {});
    throw err;
  } finally {
    release();
  }
  const digests = { size, md5: md5.digest("hex"), sha256: sha256.digest("hex") };
  if (rawHex) assertPayloadDigest(req.auth.payloadHash, digests.sha256);
  const contentMd5 = req.request.headers.get("content-md5");
  // Not a base64 MD5 at all (16 bytes): S3's InvalidDigest, not a mismatch of the body.
  if (contentMd5 !== null && !/^[A-Za-z0-9+/]{22}==$/.test(contentMd5.trim())) throw new S3Error("InvalidDigest", "Content-MD5 不是 base64 编码的 MD5 值");
  if (contentMd5 !== null && contentMd5.trim() !== Buffer.from(digests.md5, "hex").toString("base64")) {
    throw new S3Error("BadDigest", "请求体的 MD5 与 Content-MD5 不一致");
  }
  assertChecksums(checks, "请求体");
  return digests;
}

/** BadDigest when a checksum fed with all of `what`'s bytes differs from the value the client sent. */
export function assertChecksums(checks: HeaderChecksum[], what: string): void {
  const wrong = checks.find((c) => c.calc.digestBase64() !== c.value);
  if (wrong) throw new S3Error("BadDigest", `${what}的校验值与 ${wrong.name} 不一致`);
}

/**
 * Writes `chunks` to `path` (mode 0600), hashing as it goes. `checkSize` sees the running total
 * before each chunk is written and throws to stop (a cap); on any failure the file is removed.
 * For bodies Kura assembles itself (form uploads, multipart Complete), whose digests nobody signed.
 */
export async function writeDigested(path: string, chunks: AsyncIterable<Uint8Array>, checkSize: (size: number) => void): Promise<BodyDigests> {
  const md5 = createHash("md5");
  const sha256 = createHash("sha256");
  let size = 0;
  const out = await open(path, "w", 0o600);
  try {
    for await (const chunk of chunks) {
      size += chunk.length;
      checkSize(size);
      md5.update(chunk);
      sha256.update(chunk);
      await writeAll(out, chunk);
    }
    await out.close();
  } catch (err) {
    await out.close().catch(() => {});
    await rm(path, { force: true });
    throw err;
  }
  return { size, md5: md5.digest("hex"), sha256: sha256.digest("hex") };
}

/**
 * Streams the object bytes to `path` (mode 0600); the file is removed again on any failure.
 * `onChunk` sees each chunk's size before it is written (and may throw to stop the upload).
 */
export async function receiveToFile(req: S3Request, path: string, maxBytes: number, onChunk?: (bytes: number) => void): Promise<BodyDigests> {
  const file = await open(path, "w", 0o600);
  try {
    const digests = await consumeBody(req, maxBytes, async (chunk) => {
      onChunk?.(chunk.length);
      await writeAll(file, chunk);
    });
    await file.close();
    return digests;
  } catch (err) {
    await file.close().catch(() => {});
    await rm(path, { force: true });
    throw err;
  }
}

/**
 * A small XML body in memory (Complete, Delete), verified like any other body. On Complete the
 * `x-amz-checksum-*` headers are the whole object's checksum, not the XML's (`checksumsDescribeObject`):
 * the caller checks them against the object it assembles.
 */
export async function readXmlBody(req: S3Request, opts: { checksumsDescribeObject?: boolean } = {}): Promise<string> {
  const chunks: Uint8Array[] = [];
  try {
    await consumeBody(
      req,
      MAX_XML_BODY,
      (chunk) => {
        chunks.push(chunk);
      },
      opts,
    );
  } catch (err) {
    if (err instanceof S3Error && err.code === "EntityTooLarge") throw new S3Error("MalformedXML", "XML 请求体过大");
    throw err;
  }
  return Buffer.concat(chunks).toString("utf8");
}
