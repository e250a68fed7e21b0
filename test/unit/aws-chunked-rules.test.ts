/**
 * The aws-chunked decoder rule by rule (src/s3/aws-chunked-parser.ts, aws-chunked.ts): each framing
 * refusal with its code and message, the size line's hex and length bounds, the signed chunk's
 * signature shape and size cap, x-amz-decoded-content-length both ways, every trailer rule (declared,
 * shape, count, signature, checksum), and the stream wrapper's pull-one-step behaviour. Signatures
 * and checksums here are computed independently (node:crypto, node:zlib).
 */
import { describe, expect, test } from "bun:test";
import { createHash, createHmac } from "node:crypto";
import { crc32 } from "node:zlib";
import { decodeAwsChunked } from "../../src/s3/aws-chunked";
import { type AwsChunkedOptions, AwsChunkedParser, type ChunkSigning, MAX_LINE_BYTES } from "../../src/s3/aws-chunked-parser";
import { S3AuthError } from "../../src/s3/s3-auth-error";

const EMPTY = createHash("sha256").update("").digest("hex");
const sha = (b: Uint8Array | string) => createHash("sha256").update(b).digest("hex");
const KEY = createHmac("sha256", "rules-key").update("k").digest();
const SIGNING: ChunkSigning = { signingKey: KEY, scope: "20261128/auto/s3/aws4_request", amzDate: "20261128T000000Z", seedSignature: "AB".repeat(32) };
const hmacHex = (toSign: string) => createHmac("sha256", KEY).update(toSign).digest("hex");
const crc32Base64 = (data: string) => {
  const b = Buffer.alloc(4);
  b.writeUInt32BE(crc32(Buffer.from(data)));
  return b.toString("base64");
};

/** Feeds `body` whole (or byte by byte) and finishes; "ok:<decoded>" or "<code>: <message>". */
function run(body: string | Uint8Array, opts: AwsChunkedOptions = {}, byteByByte = false): string {
  const bytes = typeof body === "string" ? Buffer.from(body, "latin1") : body;
  const out: Uint8Array[] = [];
  try {
    const parser = new AwsChunkedParser(opts);
    if (byteByByte) for (let i = 0; i < bytes.length; i++) parser.feed(bytes.subarray(i, i + 1), out);
    else parser.feed(bytes, out);
    parser.finish();
    return `ok:${Buffer.concat(out).toString("latin1")}`;
  } catch (err) {
    if (err instanceof S3AuthError) return `${err.code}: ${err.message}`;
    throw err;
  }
}
const framing = (why: string) => `InvalidRequest: aws-chunked 分块格式错误：${why}`;

/** A signed body of `chunks` (chained from the seed), with optional signed trailers. */
function signedBody(chunks: string[], trailers?: [string, string][], opts: { trailerSignature?: string | null } = {}): string {
  let previous = SIGNING.seedSignature.toLowerCase();
  let body = "";
  for (const data of [...chunks, ""]) {
    const sig = hmacHex(["AWS4-HMAC-SHA256-PAYLOAD", SIGNING.amzDate, SIGNING.scope, previous, EMPTY, sha(data)].join("\n"));
    previous = sig;
    body += `${data.length.toString(16)};chunk-signature=${sig}\r\n${data === "" ? "" : `${data}\r\n`}`;
  }
  if (!trailers) return `${body}\r\n`;
  const canonical = trailers.map(([k, v]) => `${k}:${v}\n`).join("");
  const trailerSig = hmacHex(["AWS4-HMAC-SHA256-TRAILER", SIGNING.amzDate, SIGNING.scope, previous, sha(canonical)].join("\n"));
  const signature = opts.trailerSignature === null ? [] : [`x-amz-trailer-signature:${opts.trailerSignature ?? trailerSig}`];
  return `${body}${[...trailers.map(([k, v]) => `${k}:${v}`), ...signature].map((l) => `${l}\r\n`).join("")}\r\n`;
}

describe("framing", () => {
  test("unsigned chunks decode, with or without extensions, however the bytes are split", () => {
    const body = "3;ext=1\r\nabc\r\n2\r\nde\r\n0\r\n\r\n";
    expect(run(body)).toBe("ok:abcde");
    expect(run(body, {}, true)).toBe("ok:abcde");
  });

  test("each framing fault has its own refusal", () => {
    expect(run("3\r\nabcX\n0\r\n\r\n")).toBe(framing("分块数据后缺少 CRLF"));
    expect(run("3\r\nabc\rX0\r\n\r\n")).toBe(framing("分块数据后缺少 CRLF"));
    expect(run("0\r\n\r\nX")).toBe(framing("结束标记之后还有多余数据"));
    expect(run("3\nabc\r\n0\r\n\r\n")).toBe(framing("行尾必须是 CRLF"));
    expect(run("3\r\nabc\r\n")).toBe("IncompleteBody: 请求体不完整：aws-chunked 数据提前结束");
  });

  test("the size line: 1 to 13 hex digits, nothing before or after; at most 1024 bytes", () => {
    const bad = framing("分块大小不是有效的十六进制数");
    for (const line of ["g", "", "x3", "3x", " 3", "0x3", "00000000000000"]) expect([line, run(`${line}\r\n`)]).toEqual([line, bad]);
    expect(run("0000000000000\r\n\r\n")).toBe("ok:");
    // The limit counts the line with its CR.
    expect(run(`${"0".repeat(MAX_LINE_BYTES - 1)}\r\n`)).toBe(bad);
    expect(run(`${"0".repeat(MAX_LINE_BYTES)}\r\n`)).toBe(framing("分块头或尾部行过长"));
  });

  test("x-amz-decoded-content-length: a chunk past it is refused at once, a shorter body at the end; exactly it is fine", () => {
    const body = "3\r\nabc\r\n0\r\n\r\n";
    expect(run(body, { decodedLength: 3 })).toBe("ok:abc");
    expect(run(body, { decodedLength: 2 })).toBe(framing("数据超过了 x-amz-decoded-content-length"));
    // Refused from the size line, before any of the chunk's data.
    expect(run("3\r\na", { decodedLength: 2 })).toBe(framing("数据超过了 x-amz-decoded-content-length"));
    expect(run("2\r\nab\r\n2\r\ncd", { decodedLength: 3 })).toBe(framing("数据超过了 x-amz-decoded-content-length"));
    expect(run(body, { decodedLength: 4 })).toBe("IncompleteBody: 解码后的长度与 x-amz-decoded-content-length 不一致");
  });
});

describe("signed chunks", () => {
  test("a chain from the seed (any case) verifies; a tampered byte, a missing or malformed signature does not", () => {
    expect(run(signedBody(["hello", "world"]), { signed: SIGNING })).toBe("ok:helloworld");
    expect(run(signedBody(["hello", "world"]), { signed: SIGNING }, true)).toBe("ok:helloworld");
    expect(run(signedBody(["hello"]).replace("hello", "jello"), { signed: SIGNING })).toBe("SignatureDoesNotMatch: 分块签名不匹配，数据可能被篡改");
    const missing = "SignatureDoesNotMatch: 签名分块缺少有效的 chunk-signature";
    expect(run("5\r\nhello\r\n0\r\n\r\n", { signed: SIGNING })).toBe(missing);
    const body = signedBody(["hello"]);
    expect(run(body.replace(/(chunk-signature=[0-9a-f]{64})/, "$1x"), { signed: SIGNING })).toBe(missing);
    expect(
      run(
        body.replace(/chunk-signature=([0-9a-f]{64})/, (_, s: string) => `chunk-signature=${s.toUpperCase()}`),
        { signed: SIGNING },
      ),
    ).toBe(missing);
  });

  test("a signed chunk is held whole, so its size is capped (16 MiB unless told): the size line alone is refused", () => {
    const sizeLine = (size: number) => `${size.toString(16)};chunk-signature=${"0".repeat(64)}\r\n`;
    expect(run(sizeLine(16 * 1024 * 1024 + 1), { signed: SIGNING })).toBe(framing("签名分块过大"));
    expect(run(sizeLine(11), { signed: SIGNING, maxSignedChunkBytes: 10 })).toBe(framing("签名分块过大"));
    // At the cap the chunk is read (and here fails only because the body ends).
    expect(run(sizeLine(10), { signed: SIGNING, maxSignedChunkBytes: 10 })).toBe("IncompleteBody: 请求体不完整：aws-chunked 数据提前结束");
  });
});

describe("trailers", () => {
  const withTrailers = (lines: string[]) => `3\r\nabc\r\n0\r\n${lines.map((l) => `${l}\r\n`).join("")}\r\n`;
  const crc = crc32Base64("abc");

  test("the declared checksum trailer is verified; its name is matched whatever its case and blanks", () => {
    const seen: Record<string, string>[] = [];
    const opts = { trailerExpected: " X-Amz-Checksum-CRC32 ", onTrailers: (t: Record<string, string>) => void seen.push(t) };
    expect(run(withTrailers([`  X-Amz-Checksum-Crc32 :  ${crc}  `]), opts)).toBe("ok:abc");
    expect(seen).toEqual([{ "x-amz-checksum-crc32": crc }]);
    expect(run(withTrailers(["x-amz-checksum-crc32:AAAAAA=="]), opts)).toBe("BadDigest: x-amz-checksum-crc32 校验和与收到的数据不一致");
    expect(run(withTrailers(["x-amz-meta-other:1"]), opts)).toBe("MalformedTrailerError: 缺少声明的尾部字段 x-amz-checksum-crc32");
    expect(run(withTrailers([]), opts)).toBe("MalformedTrailerError: 请求声明了 x-amz-trailer，但没有发送尾部字段");
    expect(() => new AwsChunkedParser({ trailerExpected: "x-amz-checksum-md5" })).toThrow("不支持 x-amz-trailer 中声明的 x-amz-checksum-md5");
  });

  test("trailers need a declaration, a name before a colon, at most 16 of them", () => {
    expect(run(withTrailers([`x-amz-checksum-crc32:${crc}`]))).toBe("MalformedTrailerError: 请求未声明 x-amz-trailer，却带有尾部字段");
    const shape = "MalformedTrailerError: 尾部字段格式错误";
    expect(run(withTrailers([":value"]), { trailerExpected: true })).toBe(shape);
    expect(run(withTrailers(["no colon"]), { trailerExpected: true })).toBe(shape);
    const many = (n: number) => Array.from({ length: n }, (_, i) => `x-amz-meta-${i}:v`);
    expect(run(withTrailers(many(16)), { trailerExpected: true })).toBe("ok:abc");
    expect(run(withTrailers(many(17)), { trailerExpected: true })).toBe("MalformedTrailerError: 尾部字段过多");
  });

  test("signed trailers: the trailer signature is required, last, and must match the trailer lines", () => {
    const trailers: [string, string][] = [["x-amz-checksum-crc32", crc32Base64("hello")]];
    const opts = { signed: SIGNING, trailerExpected: "x-amz-checksum-crc32" };
    expect(run(signedBody(["hello"], trailers), opts)).toBe("ok:hello");
    expect(run(signedBody(["hello"], trailers, { trailerSignature: null }), opts)).toBe("SignatureDoesNotMatch: 签名的尾部缺少 x-amz-trailer-signature");
    expect(run(signedBody(["hello"], trailers, { trailerSignature: "0".repeat(64) }), opts)).toBe("SignatureDoesNotMatch: 尾部签名不匹配，数据可能被篡改");
    const late = signedBody(["hello"], trailers).replace(/\r\n\r\n$/, "\r\nx-amz-meta-late:1\r\n\r\n");
    expect(run(late, opts)).toBe("MalformedTrailerError: x-amz-trailer-signature 之后不能再有尾部字段");
  });

  test("signed trailers: the signature covers every trailer line, each `name:value\\n`, in the order sent", () => {
    const trailers: [string, string][] = [
      ["x-amz-checksum-crc32", crc32Base64("hello")],
      ["x-amz-meta-note", "two"],
    ];
    const opts = { signed: SIGNING, trailerExpected: "x-amz-checksum-crc32" };
    expect(run(signedBody(["hello"], trailers), opts)).toBe("ok:hello");
    // The same two lines sent the other way round, under the first order's signature.
    const signature = /x-amz-trailer-signature:(\w+)/.exec(signedBody(["hello"], trailers))![1]!;
    const swapped = signedBody(["hello"], [trailers[1]!, trailers[0]!], { trailerSignature: signature });
    expect(run(swapped, opts)).toBe("SignatureDoesNotMatch: 尾部签名不匹配，数据可能被篡改");
  });
});

describe("the decoding stream", () => {
  /** A source of `pieces` that counts its pulls and records a cancel. */
  function source(pieces: string[]) {
    const seen = { pulls: 0, cancelled: undefined as unknown };
    let i = 0;
    const stream = new ReadableStream<Uint8Array>(
      {
        pull(c) {
          seen.pulls++;
          if (i < pieces.length) c.enqueue(Buffer.from(pieces[i++]!, "latin1"));
          else c.close();
        },
        cancel(reason) {
          seen.cancelled = reason;
        },
      },
      { highWaterMark: 0 },
    );
    return { stream, seen };
  }
  const tick = () => new Promise<void>((resolve) => setTimeout(resolve, 5));

  test("nothing is read before the consumer asks, and each read takes only what one step needs", async () => {
    const { stream, seen } = source(["3\r\nabc\r\n", "3\r\ndef\r\n", "0\r\n\r\n"]);
    const reader = decodeAwsChunked(stream).getReader();
    await tick();
    expect(seen.pulls).toBe(0);
    expect(Buffer.from((await reader.read()).value!).toString()).toBe("abc");
    expect(seen.pulls).toBe(1);
    expect(Buffer.from((await reader.read()).value!).toString()).toBe("def");
    expect(seen.pulls).toBe(2);
    expect((await reader.read()).done).toBe(true);
  });

  test("a consumer's cancel reaches the source; a source error and a framing error end the stream with that error", async () => {
    const cancelled = source(["3\r\nabc\r\n", "0\r\n\r\n"]);
    const reader = decodeAwsChunked(cancelled.stream).getReader();
    await reader.read();
    await reader.cancel("enough");
    expect(cancelled.seen.cancelled).toBe("enough");

    const broken = new Error("连接中断（测试）");
    const failing = new ReadableStream<Uint8Array>({
      pull(c) {
        c.error(broken);
      },
    });
    expect(
      await decodeAwsChunked(failing)
        .getReader()
        .read()
        .catch((e: unknown) => e),
    ).toBe(broken);

    const bad = source(["3\r\nabcX\n"]);
    const err = await decodeAwsChunked(bad.stream)
      .getReader()
      .read()
      .catch((e: unknown) => e);
    expect((err as S3AuthError).message).toBe("aws-chunked 分块格式错误：分块数据后缺少 CRLF");
    expect(bad.seen.cancelled).toBe(err);
  });
});
