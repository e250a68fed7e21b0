/**
 * SigV4 verifier and aws-chunked decoder against every request captured from real S3 clients
 * (rclone, AWS SDK v3 on node and bun, PicGo, restic): shared/s3/requests and shared/s3/bun-probe.
 */
import { describe, expect, test } from "bun:test";
import { createHash } from "node:crypto";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { SHARED_DIR } from "../helpers/shared";
import { assertPayloadDigest, S3AuthError, verifySigV4, type SigV4Auth, type SigV4Request } from "../../src/s3/sigv4.ts";
import { decodeAwsChunked, type AwsChunkedOptions } from "../../src/s3/aws-chunked.ts";
import { formatAmzDate, parseAmzDate } from "../../src/s3/sigv4-canonical.ts";
import aws4 from "aws4";

const S3_DIR = join(SHARED_DIR, "s3");

interface Vector {
  file: string;
  method: string;
  url: string;
  headers: [string, string][];
  body_base64: string;
  body_sha256: string;
  body_truncated: boolean;
  credentials: { access_key_id: string; secret_access_key: string; region: string; service: string };
  expected: {
    signature: string;
    canonical_request: string;
    string_to_sign: string;
    signed_headers: string[];
    credential_scope: { access_key_id: string; date: string; region: string; service: string };
    amz_date: string;
    payload_hash_mode: string;
    presigned_expires_s?: number;
    decoded_sha256?: string;
    aws_chunked?: { chunks: { size: number }[]; trailers: string[] };
  };
}

const vectors: Vector[] = readdirSync(join(S3_DIR, "requests"))
  .filter((f) => f.endsWith(".json"))
  .sort()
  .map((file) => ({ file, ...JSON.parse(readFileSync(join(S3_DIR, "requests", file), "utf8")) }));
const byFile = (name: string) => vectors.find((v) => v.file === name) as Vector;
const CREDS = vectors[0]!.credentials;
const lookup = (id: string) => (id === CREDS.access_key_id ? CREDS.secret_access_key : undefined);
const isStreaming = (v: Vector) => v.expected.payload_hash_mode.startsWith("STREAMING-");
const sha256 = (b: Uint8Array) => createHash("sha256").update(b).digest("hex");

function requestOf(v: Vector, patch: Partial<SigV4Request> = {}): SigV4Request {
  const raw = Buffer.from(v.body_base64, "base64");
  // Only complete, non-framed bodies are handed over whole (the hex-hash check needs all bytes).
  const body = v.body_truncated || isStreaming(v) ? undefined : new Uint8Array(raw);
  return { method: v.method, url: v.url, headers: v.headers, body, ...patch };
}
const verifyAt = (v: Vector, patch: Partial<SigV4Request> = {}, now = parseAmzDate(v.expected.amz_date), secretOf = lookup) =>
  verifySigV4(requestOf(v, patch), { lookupSecret: secretOf, now });

function expectS3Error(fn: () => unknown, code: string): void {
  let caught: unknown;
  try {
    fn();
  } catch (err) {
    caught = err;
  }
  expect(caught).toBeInstanceOf(S3AuthError);
  expect((caught as S3AuthError).code).toBe(code as S3AuthError["code"]);
}

/** The raw body as a stream cut into uneven pieces, so framing lines straddle reads. */
function streamOf(bytes: Uint8Array, pieceSizes = [1, 7, 100, 4093, 65536]): ReadableStream<Uint8Array> {
  let offset = 0;
  let n = 0;
  return new ReadableStream({
    pull(c) {
      if (offset >= bytes.length) return c.close();
      const size = pieceSizes[n++ % pieceSizes.length] as number;
      c.enqueue(bytes.slice(offset, offset + size));
      offset += size;
    },
  });
}

async function drain(stream: ReadableStream<Uint8Array>): Promise<Uint8Array> {
  return new Uint8Array(await new Response(stream).arrayBuffer());
}

function chunkedOptions(v: Vector, auth: SigV4Auth, onTrailers?: AwsChunkedOptions["onTrailers"]): AwsChunkedOptions {
  const trailer = v.headers.find(([k]) => k.toLowerCase() === "x-amz-trailer")?.[1];
  return {
    signed: auth.payloadMode.startsWith("STREAMING-AWS4-HMAC-SHA256") ? auth : undefined,
    trailerExpected: trailer ?? false,
    decodedLength: auth.decodedContentLength,
    onTrailers,
  };
}

describe("every captured request verifies", () => {
  test("the vector set is the documented one", () => {
    expect(vectors.length).toBe(313);
  });

  test.each(vectors.map((v) => [v.file, v] as const))("%s", (_, v) => {
    const auth = verifyAt(v);
    expect(auth.canonicalRequest).toBe(v.expected.canonical_request);
    expect(auth.stringToSign).toBe(v.expected.string_to_sign);
    expect(auth.seedSignature).toBe(v.expected.signature);
    expect(auth.signedHeaders).toEqual(v.expected.signed_headers);
    const s = v.expected.credential_scope;
    expect([auth.accessKeyId, auth.region, auth.scope]).toEqual([s.access_key_id, s.region, `${s.date}/${s.region}/${s.service}/aws4_request`]);
    expect(auth.amzDate).toBe(v.expected.amz_date);
    expect(auth.payloadHash).toBe(v.expected.payload_hash_mode);
    if (auth.payloadMode === "sha256" && v.body_truncated) assertPayloadDigest(auth.payloadHash, v.body_sha256);
  });
});

describe("aws-chunked bodies decode and their chunk signatures verify", () => {
  const chunked = vectors.filter((v) => isStreaming(v) && !v.body_truncated);
  test("there are signed and unsigned-trailer bodies among them", () => {
    expect(chunked.filter((v) => v.expected.payload_hash_mode === "STREAMING-AWS4-HMAC-SHA256-PAYLOAD").length).toBe(7);
    expect(chunked.filter((v) => v.expected.payload_hash_mode === "STREAMING-UNSIGNED-PAYLOAD-TRAILER").length).toBe(6);
  });

  test.each(chunked.map((v) => [v.file, v] as const))("%s", async (_, v) => {
    const auth = verifyAt(v);
    let trailers: Record<string, string> | undefined;
    const decoded = await drain(
      decodeAwsChunked(
        streamOf(Buffer.from(v.body_base64, "base64")),
        chunkedOptions(v, auth, (t) => (trailers = t)),
      ),
    );
    expect(sha256(decoded)).toBe(v.expected.decoded_sha256 as string);
    const sent = (v.expected.aws_chunked?.trailers ?? []).map((line) => line.split(":", 2) as [string, string]);
    expect(Object.entries(trailers ?? {})).toEqual(sent);
  });
});

describe("what a Bun.serve handler sees (bun-probe)", () => {
  interface Probe {
    label: string;
    method: string;
    raw_path_query: string;
    bun_req_url: string;
    headers_as_bun_sees_them: [string, string][];
    canonical_request: string;
  }
  const probes: Probe[] = readdirSync(join(S3_DIR, "bun-probe")).map((f) => JSON.parse(readFileSync(join(S3_DIR, "bun-probe", f), "utf8")));

  test.each(probes.map((p) => [p.label, p] as const))("%s verifies from req.url and req.headers", (_, p) => {
    const headers = new Headers(p.headers_as_bun_sees_them);
    const url = new URL(p.bun_req_url);
    const date = headers.get("x-amz-date") ?? (url.searchParams.get("X-Amz-Date") as string);
    const auth = verifySigV4({ method: p.method, url: p.bun_req_url, headers }, { lookupSecret: lookup, now: parseAmzDate(date) });
    // The probe canonicalised Bun's "287, 287" naively and failed; collapsing identical duplicates fixes it.
    expect(auth.canonicalRequest).toBe(p.canonical_request.replace("content-length:287, 287\n", "content-length:287\n"));
  });
});

describe("rejections", () => {
  const hexPut = byFile("picgo-PutObject-1.json");
  const presigned = vectors.find((v) => v.url.includes("X-Amz-Signature=") && v.method === "GET") as Vector;
  const rclonePresignedPut = byFile("rclone-PutObject-12.json");
  const setHeader = (v: Vector, name: string, value: string): [string, string][] => v.headers.map(([k, val]) => [k, k.toLowerCase() === name ? value : val]);
  const flipLast = (hex: string) => hex.slice(0, -1) + (hex.endsWith("0") ? "1" : "0");

  test("one changed signature character → SignatureDoesNotMatch (header and presigned)", () => {
    const authz = hexPut.headers.find(([k]) => k.toLowerCase() === "authorization")![1];
    expectS3Error(() => verifyAt(hexPut, { headers: setHeader(hexPut, "authorization", flipLast(authz)) }), "SignatureDoesNotMatch");
    const sig = presigned.expected.signature;
    expectS3Error(() => verifyAt(presigned, { url: presigned.url.replace(sig, flipLast(sig)) }), "SignatureDoesNotMatch");
  });

  test("a changed signed header or query value → SignatureDoesNotMatch", () => {
    expectS3Error(() => verifyAt(hexPut, { headers: setHeader(hexPut, "content-type", "text/html") }), "SignatureDoesNotMatch");
    expectS3Error(() => verifyAt(presigned, { url: presigned.url.replace("/s3/images/", "/s3/images/x") }), "SignatureDoesNotMatch");
  });

  test("wrong secret → SignatureDoesNotMatch; unknown key → InvalidAccessKeyId", () => {
    const wrongSecret = () => `${CREDS.secret_access_key}x`;
    expectS3Error(() => verifyAt(hexPut, {}, undefined, wrongSecret), "SignatureDoesNotMatch");
    expectS3Error(() => verifyAt(hexPut, {}, undefined, () => undefined), "InvalidAccessKeyId");
  });

  test("clock skew over 15 minutes → RequestTimeTooSkewed, under it passes", () => {
    const t = parseAmzDate(hexPut.expected.amz_date) as number;
    expect(verifyAt(hexPut, {}, t + 14 * 60_000).accessKeyId).toBe(CREDS.access_key_id);
    expect(verifyAt(hexPut, {}, t - 14 * 60_000).accessKeyId).toBe(CREDS.access_key_id);
    expectS3Error(() => verifyAt(hexPut, {}, t + 16 * 60_000), "RequestTimeTooSkewed");
    expectS3Error(() => verifyAt(hexPut, {}, t - 16 * 60_000), "RequestTimeTooSkewed");
  });

  test("presigned URL: valid until X-Amz-Expires, then AccessDenied", () => {
    for (const v of [presigned, rclonePresignedPut]) {
      const t = parseAmzDate(v.expected.amz_date) as number;
      const end = t + (v.expected.presigned_expires_s as number) * 1000;
      expect(verifyAt(v, {}, end).expiresAt).toBe(end);
      expectS3Error(() => verifyAt(v, {}, end + 1000), "AccessDenied");
    }
  });

  test("X-Amz-Expires over 7 days → AuthorizationQueryParametersError", () => {
    expectS3Error(() => verifyAt(presigned, { url: presigned.url.replace(/X-Amz-Expires=\d+/, "X-Amz-Expires=604801") }), "AuthorizationQueryParametersError");
  });

  test("body not matching the hex x-amz-content-sha256 → XAmzContentSHA256Mismatch", () => {
    const body = new Uint8Array(Buffer.from(hexPut.body_base64, "base64"));
    expect(verifyAt(hexPut, { body }).payloadMode).toBe("sha256");
    body[10] = (body[10] as number) ^ 1;
    expectS3Error(() => verifyAt(hexPut, { body }), "XAmzContentSHA256Mismatch");
  });

  test("unsigned x-amz-* header, anonymous request, missing x-amz-content-sha256, malformed Authorization", () => {
    expectS3Error(() => verifyAt(hexPut, { headers: [...hexPut.headers, ["x-amz-copy-source", "images/other.jpg"]] }), "AccessDenied");
    expectS3Error(() => verifyAt(hexPut, { headers: hexPut.headers.filter(([k]) => k.toLowerCase() !== "authorization") }), "AccessDenied");
    expectS3Error(() => verifyAt(hexPut, { headers: hexPut.headers.filter(([k]) => k.toLowerCase() !== "x-amz-content-sha256") }), "MissingSecurityHeader");
    expectS3Error(
      () =>
        verifyAt(hexPut, { headers: setHeader(hexPut, "authorization", "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE12345/20261122/us-east-1/s3/aws4_request") }),
      "AuthorizationHeaderMalformed",
    );
  });
});

describe("requests signed by an independent signer (aws4) with characters sent unencoded", () => {
  // aws4 sends `(`, `)`, `!` and `'` as typed but signs the strictly encoded path: the re-encoded canonical URI candidate.
  const now = Date.UTC(2026, 10, 23, 8, 0, 0);
  const creds = { accessKeyId: CREDS.access_key_id, secretAccessKey: CREDS.secret_access_key };
  const sign = (opts: aws4.Request) => aws4.sign({ host: "127.0.0.1:9000", service: "s3", region: "auto", ...opts }, creds);
  const pairs = (h: aws4.Request["headers"]) => Object.entries(h ?? {}).map(([k, v]) => [k, String(v)] as [string, string]);

  test("header auth with a hex payload hash", () => {
    const body = "hello";
    const signed = sign({
      method: "PUT",
      path: "/s3/images/a(1)!'.jpg?x-id=PutObject&tag=a%20b",
      body,
      headers: { "X-Amz-Date": formatAmzDate(now), "X-Amz-Content-Sha256": sha256(Buffer.from(body)) },
    });
    const auth = verifySigV4(
      { method: "PUT", url: signed.path as string, headers: pairs(signed.headers), body: Buffer.from(body) },
      { lookupSecret: lookup, now },
    );
    expect(auth.canonicalRequest.split("\n").slice(1, 3)).toEqual(["/s3/images/a%281%29%21%27.jpg", "tag=a%20b&x-id=PutObject"]);
    expect(auth.region).toBe("auto");
    expectS3Error(
      () =>
        verifySigV4({ method: "PUT", url: signed.path as string, headers: pairs(signed.headers), body: Buffer.from("hellO") }, { lookupSecret: lookup, now }),
      "XAmzContentSHA256Mismatch",
    );
  });

  test("presigned GET", () => {
    const signed = sign({ method: "GET", path: `/s3/images/x(2).png?X-Amz-Expires=60&X-Amz-Date=${formatAmzDate(now)}`, signQuery: true });
    const req = { method: "GET", url: signed.path as string, headers: [["Host", "127.0.0.1:9000"]] as [string, string][] };
    expect(verifySigV4(req, { lookupSecret: lookup, now: now + 60_000 }).auth).toBe("presigned");
    expectS3Error(() => verifySigV4(req, { lookupSecret: lookup, now: now + 61_000 }), "AccessDenied");
  });
});
