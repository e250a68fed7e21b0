/**
 * aws-chunked framing errors and tampering, signed trailers, streaming behaviour, and the whole
 * verifier behind a real Bun.serve fed the captured requests byte for byte over TCP.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { createHash } from "node:crypto";
import { connect } from "node:net";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { SHARED_DIR } from "../helpers/shared";
import { assertPayloadSha256, S3AuthError, verifySigV4 } from "../../src/s3/sigv4.ts";
import { decodeAwsChunked, type AwsChunkedOptions, type ChunkSigning } from "../../src/s3/aws-chunked.ts";
import { deriveSigningKey, EMPTY_SHA256, parseAmzDate, sha256Hex, signHex } from "../../src/s3/sigv4-canonical.ts";

interface Vector {
  file: string;
  method: string;
  url: string;
  headers: [string, string][];
  body_base64: string;
  body_truncated: boolean;
  credentials: { access_key_id: string; secret_access_key: string };
  expected: { amz_date: string; signature: string; canonical_request: string; payload_hash_mode: string; decoded_sha256: string };
}
const REQ_DIR = join(SHARED_DIR, "s3/requests");
const vectors: Vector[] = readdirSync(REQ_DIR)
  .filter((f) => f.endsWith(".json"))
  .sort()
  .map((file) => ({ file, ...JSON.parse(readFileSync(join(REQ_DIR, file), "utf8")) }));
const CREDS = vectors[0]!.credentials;
const lookup = (id: string) => (id === CREDS.access_key_id ? CREDS.secret_access_key : undefined);
const header = (v: Vector, name: string) => v.headers.find(([k]) => k.toLowerCase() === name)?.[1];
const bodyOf = (v: Vector) => new Uint8Array(Buffer.from(v.body_base64, "base64"));
const sha256 = (b: Uint8Array) => createHash("sha256").update(b).digest("hex");
const enc = (s: string) => new TextEncoder().encode(s);

function streamOf(bytes: Uint8Array, piece = 1000): ReadableStream<Uint8Array> {
  let offset = 0;
  return new ReadableStream({
    pull(c) {
      if (offset >= bytes.length) return c.close();
      c.enqueue(bytes.slice(offset, (offset += piece)));
    },
  });
}
async function decode(bytes: Uint8Array, opts: AwsChunkedOptions): Promise<Uint8Array> {
  return new Uint8Array(await new Response(decodeAwsChunked(streamOf(bytes), opts)).arrayBuffer());
}
async function expectDecodeError(bytes: Uint8Array, opts: AwsChunkedOptions, code: string): Promise<void> {
  const err = await decode(bytes, opts).then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(S3AuthError);
  expect((err as S3AuthError).code).toBe(code as S3AuthError["code"]);
}

const restic = vectors.find((v) => v.file === "restic-PutObject-5.json") as Vector; // 4 signed chunks, kept whole
const resticAuth = () =>
  verifySigV4({ method: restic.method, url: restic.url, headers: restic.headers }, { lookupSecret: lookup, now: parseAmzDate(restic.expected.amz_date) });
const sdkStream = vectors.find((v) => v.file === "sdk-node-PutObject-5.json") as Vector; // unsigned, crc32 trailer
const sdkOpts: AwsChunkedOptions = { trailerExpected: "x-amz-checksum-crc32", decodedLength: 25941 };

describe("signed chunks", () => {
  test("the untouched body decodes to the object", async () => {
    const auth = resticAuth();
    expect(sha256(await decode(bodyOf(restic), { signed: auth, decodedLength: auth.decodedContentLength }))).toBe(restic.expected.decoded_sha256);
  });

  test("one flipped data byte in a later chunk → SignatureDoesNotMatch", async () => {
    const body = bodyOf(restic);
    body[body.length - 500] = (body[body.length - 500] as number) ^ 0x40;
    await expectDecodeError(body, { signed: resticAuth() }, "SignatureDoesNotMatch");
  });

  test("a changed chunk-signature, or none at all → SignatureDoesNotMatch", async () => {
    const text = Buffer.from(bodyOf(restic)).toString("latin1");
    const sig = /chunk-signature=([0-9a-f]{64})/.exec(text)![1]!;
    const flipped = text.replace(sig, sig.slice(0, -1) + (sig.endsWith("0") ? "1" : "0"));
    await expectDecodeError(new Uint8Array(Buffer.from(flipped, "latin1")), { signed: resticAuth() }, "SignatureDoesNotMatch");
    await expectDecodeError(enc("3\r\nabc\r\n0\r\n\r\n"), { signed: resticAuth() }, "SignatureDoesNotMatch");
  });

  test("a body without its final signed chunk → IncompleteBody", async () => {
    const text = Buffer.from(bodyOf(restic)).toString("latin1");
    await expectDecodeError(
      new Uint8Array(Buffer.from(text.slice(0, text.lastIndexOf("0;chunk-signature")), "latin1")),
      { signed: resticAuth() },
      "IncompleteBody",
    );
  });
});

/** Build a signed-trailer body the way AWS specifies it (no captured client sends this mode). */
function signedTrailerBody(s: ChunkSigning, chunks: string[], trailer: string): Uint8Array {
  let prev = s.seedSignature;
  let out = "";
  for (const data of [...chunks, ""]) {
    prev = signHex(s.signingKey, ["AWS4-HMAC-SHA256-PAYLOAD", s.amzDate, s.scope, prev, EMPTY_SHA256, sha256Hex(data)].join("\n"));
    out += `${data.length.toString(16)};chunk-signature=${prev}\r\n${data}${data ? "\r\n" : ""}`;
  }
  const trailerSig = signHex(s.signingKey, ["AWS4-HMAC-SHA256-TRAILER", s.amzDate, s.scope, prev, sha256Hex(`${trailer}\n`)].join("\n"));
  return enc(`${out}${trailer}\r\nx-amz-trailer-signature:${trailerSig}\r\n\r\n`);
}

describe("signed chunks with a signed trailer", () => {
  const signing: ChunkSigning = {
    signingKey: deriveSigningKey(CREDS.secret_access_key, "20261122", "us-east-1", "s3"),
    scope: "20261122/us-east-1/s3/aws4_request",
    amzDate: "20261122T220000Z",
    seedSignature: "a".repeat(64),
  };
  const crcOfHelloWorld = Buffer.from([0x0d, 0x4a, 0x11, 0x85]).toString("base64"); // zlib crc32("hello world")
  const opts: AwsChunkedOptions = { signed: signing, trailerExpected: "x-amz-checksum-crc32", decodedLength: 11 };

  test("decodes and checks the trailer checksum and signature", async () => {
    const out = await decode(signedTrailerBody(signing, ["hello ", "world"], `x-amz-checksum-crc32:${crcOfHelloWorld}`), opts);
    expect(Buffer.from(out).toString()).toBe("hello world");
  });

  test("a checksum that does not match the data → BadDigest; a changed trailer → SignatureDoesNotMatch", async () => {
    await expectDecodeError(signedTrailerBody(signing, ["hello ", "world"], "x-amz-checksum-crc32:AAAAAA=="), opts, "BadDigest");
    const body = Buffer.from(signedTrailerBody(signing, ["hello ", "world"], `x-amz-checksum-crc32:${crcOfHelloWorld}`)).toString("latin1");
    await expectDecodeError(enc(body.replace(`crc32:${crcOfHelloWorld}`, "crc32:AAAAAA==")), opts, "SignatureDoesNotMatch");
  });
});

describe("framing and length errors", () => {
  const sdkText = Buffer.from(bodyOf(sdkStream)).toString("latin1");
  const flipByteAt = (text: string, i: number) => text.slice(0, i) + String.fromCharCode(text.charCodeAt(i) ^ 1) + text.slice(i + 1);
  const cases: [string, string, AwsChunkedOptions, string][] = [
    ["chunk-size line too long", `${"0".repeat(2000)}1\r\nx\r\n0\r\n\r\n`, {}, "InvalidRequest"],
    ["size not hex", "zz\r\nx\r\n0\r\n\r\n", {}, "InvalidRequest"],
    ["missing CRLF after data", "3\r\nabcd\r\n0\r\n\r\n", {}, "InvalidRequest"],
    ["bare LF line end", "3\nabc\r\n0\r\n\r\n", {}, "InvalidRequest"],
    ["extra data after the end", "3\r\nabc\r\n0\r\n\r\nmore", {}, "InvalidRequest"],
    ["trailer without x-amz-trailer", "3\r\nabc\r\n0\r\nx-amz-checksum-crc32:AAAAAA==\r\n\r\n", {}, "MalformedTrailerError"],
    ["body cut in the middle", "3\r\nab", {}, "IncompleteBody"],
    ["more than x-amz-decoded-content-length", "3\r\nabc\r\n0\r\n\r\n", { decodedLength: 2 }, "InvalidRequest"],
    ["less than x-amz-decoded-content-length", "3\r\nabc\r\n0\r\n\r\n", { decodedLength: 4 }, "IncompleteBody"],
    ["declared trailer missing", "3\r\nabc\r\n0\r\n\r\n", { trailerExpected: "x-amz-checksum-crc32" }, "MalformedTrailerError"],
    ["crc32 trailer not matching the data", sdkText.replace("XejPBA==", "AAAAAA=="), sdkOpts, "BadDigest"],
    ["one data byte changed under a crc32 trailer", flipByteAt(sdkText, sdkText.indexOf("2000\r\n") + 100), sdkOpts, "BadDigest"],
  ];
  test.each(cases)("%s", async (_, body, opts, code) => {
    await expectDecodeError(new Uint8Array(Buffer.from(body, "latin1")), opts, code);
  });

  test("the untouched SDK stream decodes (control for the cases above)", async () => {
    expect(sha256(await decode(bodyOf(sdkStream), sdkOpts))).toBe(sdkStream.expected.decoded_sha256);
  });
});

describe("checksum trailers of every algorithm we compute", () => {
  const data = "123456789";
  const digest = (alg: string) => createHash(alg).update(data).digest("base64");
  const cases: [string, string][] = [
    ["x-amz-checksum-crc32", Buffer.from("cbf43926", "hex").toString("base64")], // CRC-32/ISO-HDLC check value
    ["x-amz-checksum-crc32c", Buffer.from("e3069283", "hex").toString("base64")], // CRC-32C check value
    ["x-amz-checksum-sha1", digest("sha1")],
    ["x-amz-checksum-sha256", digest("sha256")],
  ];
  test.each(cases)("%s", async (name, value) => {
    const body = (v: string) => enc(`9\r\n${data}\r\n0\r\n${name}:${v}\r\n\r\n`);
    let seen: Record<string, string> = {};
    const out = await decode(body(value), { trailerExpected: name, decodedLength: 9, onTrailers: (t) => (seen = t) });
    expect([Buffer.from(out).toString(), seen[name]]).toEqual([data, value]);
    await expectDecodeError(body(`A${value.slice(1)}`), { trailerExpected: name }, "BadDigest");
  });
});

test("unsigned chunks are passed on before the body has ended (no whole-body buffering)", async () => {
  let release!: () => void;
  const gate = new Promise<void>((r) => (release = r));
  const source = new ReadableStream<Uint8Array>({
    async start(c) {
      c.enqueue(enc("5\r\nfirst\r\n"));
      await gate; // the rest of the body only arrives after the first chunk has been read
      c.enqueue(enc("0\r\n\r\n"));
      c.close();
    },
  });
  const reader = decodeAwsChunked(source, { decodedLength: 5 }).getReader();
  expect(Buffer.from((await reader.read()).value!).toString()).toBe("first");
  release();
  expect((await reader.read()).done).toBe(true);
});

describe("behind a real Bun.serve, fed the captured bytes over TCP", () => {
  const results = new Map<string, { ok: boolean; canonical?: string; sha?: string; error?: string }>();
  let server: ReturnType<typeof Bun.serve>;
  beforeAll(() => {
    server = Bun.serve({
      port: 0,
      hostname: "127.0.0.1",
      async fetch(req) {
        const id = req.headers.get("x-test-vector") as string;
        const headers = [...req.headers].filter(([k]) => k !== "x-test-vector") as [string, string][];
        try {
          const date = req.headers.get("x-amz-date") ?? (new URL(req.url).searchParams.get("X-Amz-Date") as string);
          const auth = verifySigV4({ method: req.method, url: req.url, headers }, { lookupSecret: lookup, now: parseAmzDate(date) });
          let body: Uint8Array;
          if (auth.payloadMode.startsWith("STREAMING-") && req.body) {
            const signed = auth.payloadMode.startsWith("STREAMING-AWS4") ? auth : undefined;
            body = new Uint8Array(
              await new Response(
                decodeAwsChunked(req.body, { signed, trailerExpected: req.headers.get("x-amz-trailer") ?? false, decodedLength: auth.decodedContentLength }),
              ).arrayBuffer(),
            );
          } else {
            body = new Uint8Array(await req.arrayBuffer());
            if (auth.payloadMode === "sha256") assertPayloadSha256(auth.payloadHash, body);
          }
          results.set(id, { ok: true, canonical: auth.canonicalRequest, sha: sha256(body) });
        } catch (err) {
          results.set(id, { ok: false, error: String(err) });
        }
        return new Response(null, { status: 200, headers: { "content-length": "0" } });
      },
    });
  });
  afterAll(() => server.stop(true));

  function send(v: Vector): Promise<void> {
    const body = bodyOf(v);
    const chunked = header(v, "transfer-encoding")?.toLowerCase() === "chunked";
    const head = `${v.method} ${v.url} HTTP/1.1\r\n${v.headers.map(([k, val]) => `${k}: ${val}\r\n`).join("")}x-test-vector: ${v.file}\r\n\r\n`;
    const framed = chunked ? Buffer.concat([Buffer.from(`${body.length.toString(16)}\r\n`), body, Buffer.from("\r\n0\r\n\r\n")]) : Buffer.from(body);
    return new Promise((resolve, reject) => {
      const sock = connect(server.port as number, "127.0.0.1", () =>
        sock.write(Buffer.concat([Buffer.from(head, "latin1"), chunked && body.length === 0 ? Buffer.from("0\r\n\r\n") : framed])),
      );
      let got = "";
      sock.on("data", (d) => {
        got += d.toString("latin1");
        if (/HTTP\/1\.1 [2-5]\d\d [^\r]*\r\n[\s\S]*?\r\n\r\n/.test(got)) {
          sock.destroy();
          resolve();
        }
      });
      sock.on("error", reject);
    });
  }

  test("every complete captured request verifies from req.url/req.headers and its body checks out", async () => {
    const complete = vectors.filter((v) => !v.body_truncated);
    for (const v of complete) await send(v);
    const failures = complete.filter((v) => {
      const r = results.get(v.file);
      return !r?.ok || r.sha !== v.expected.decoded_sha256;
    });
    expect(failures.map((v) => `${v.file}: ${results.get(v.file)?.error ?? "sha"}`)).toEqual([]);
    expect(results.size).toBe(complete.length);
  });
});
