/**
 * Fuzz tier, in-process: the pure parsers that see hostile bytes before any authentication or
 * right after it. Each property: the parser returns a well-formed result or throws its own
 * error type with a Chinese message (which the HTTP layer turns into a 4xx) — never another
 * exception — and no single call holds the event loop longer than PARSER_BLOCK_MS.
 */
import { describe, expect, test } from "bun:test";
import fc from "fast-check";
import aws4 from "aws4";
import { createHash } from "node:crypto";
import { AwsChunkedParser, type ChunkSigning } from "../../src/s3/aws-chunked";
import { S3AuthError } from "../../src/s3/s3-auth-error";
import { verifySigV4 } from "../../src/s3/sigv4";
import { deriveSigningKey, EMPTY_SHA256, formatAmzDate, signHex } from "../../src/s3/sigv4-canonical";
import { parseRange } from "../../src/delivery/serve-image";
import { InvalidParamsError, parseDeliveryParams } from "../../src/delivery/params";
import { InvalidRefererPatternError, refererAllowed, validateRefererPattern } from "../../src/delivery/referer";
import { readCookie } from "../../src/http/guard";
import { parseHttpDate } from "../../src/shared/http-date";
import { httpErrorOf } from "../../src/http/errors";
import { decryptBuffer, encryptBuffer, BLOCK_DATA_SIZE } from "../../src/channels/rclone/crypt-data";
import { makeCrypt } from "../../src/channels/rclone/crypt";
import { expectContained, fuzzParams, hasChinese, hostileString } from "./fuzz-support";

/** Asserts the budget and that a thrown error is of the expected kind with a Chinese message. */
const isS3AuthError = (e: unknown) => e instanceof S3AuthError;

describe("aws-chunked decoder", () => {
  const signing = (): ChunkSigning => ({
    signingKey: deriveSigningKey("fuzz-secret", "20260101", "auto", "s3"),
    scope: "20260101/auto/s3/aws4_request",
    amzDate: "20260101T000000Z",
    seedSignature: "a".repeat(64),
  });

  /** A correct aws-chunked encoding of `chunks`, signed when `s` is given. */
  function encode(chunks: Uint8Array[], s?: ChunkSigning): Uint8Array {
    const parts: Uint8Array[] = [];
    let previous = s?.seedSignature ?? "";
    for (const data of [...chunks.filter((c) => c.length > 0), new Uint8Array(0)]) {
      let ext = "";
      if (s) {
        const hash = createHash("sha256").update(data).digest("hex");
        previous = signHex(s.signingKey, ["AWS4-HMAC-SHA256-PAYLOAD", s.amzDate, s.scope, previous, EMPTY_SHA256, hash].join("\n"));
        ext = `;chunk-signature=${previous}`;
      }
      parts.push(Buffer.from(`${data.length.toString(16)}${ext}\r\n`), data, Buffer.from("\r\n"));
    }
    return Buffer.concat(parts);
  }

  /** Feeds `body` in pieces cut at `cuts`, returning the decoded bytes or throwing. */
  function decode(body: Uint8Array, cuts: number[], opts: ConstructorParameters<typeof AwsChunkedParser>[0]): Uint8Array {
    const parser = new AwsChunkedParser(opts);
    const out: Uint8Array[] = [];
    const points = [...new Set(cuts.map((c) => c % (body.length + 1)))].sort((a, b) => a - b);
    let at = 0;
    for (const p of [...points, body.length]) {
      parser.feed(body.subarray(at, p), out);
      at = p;
    }
    parser.finish();
    return Buffer.concat(out);
  }

  const chunkList = fc.array(fc.uint8Array({ maxLength: 300 }), { maxLength: 6 });
  const cuts = fc.array(fc.nat(), { maxLength: 8 });

  test("valid encodings, signed or not, decode to the original bytes however the network splits them", () => {
    fc.assert(
      fc.property(chunkList, cuts, fc.boolean(), (chunks, c, signed) => {
        const s = signed ? signing() : undefined;
        const total = chunks.reduce((n, x) => n + x.length, 0);
        const out = decode(encode(chunks, s), c, { signed: s, decodedLength: total });
        expect(Buffer.from(out).equals(Buffer.concat(chunks))).toBe(true);
      }),
      fuzzParams(),
    );
  });

  test("a corrupted encoding is an S3 error or (signed) the untouched data, never anything else", () => {
    fc.assert(
      fc.property(
        chunkList,
        cuts,
        fc.boolean(),
        fc.array(fc.tuple(fc.nat(), fc.integer({ min: 0, max: 255 })), { minLength: 1, maxLength: 4 }),
        fc.nat(),
        (chunks, c, signed, flips, cut) => {
          const s = signed ? signing() : undefined;
          const body = Buffer.from(encode(chunks, s));
          for (const [pos, byte] of flips) body[pos % body.length] = byte;
          const truncated = cut % 5 === 0 ? body.subarray(0, cut % (body.length + 1)) : body;
          const out = expectContained(() => decode(truncated, c, { signed: s }), isS3AuthError);
          // A signed body that still decodes must carry exactly the signed data.
          if (out && s) expect(Buffer.from(out).equals(Buffer.concat(chunks))).toBe(true);
        },
      ),
      fuzzParams(2),
    );
  });

  test("arbitrary bytes and hostile lines are refused with an S3 error, in bounded time", () => {
    const bytes = fc.oneof(
      fc.uint8Array({ maxLength: 2_000 }),
      hostileString.map((s) => Buffer.from(s, "latin1")),
    );
    fc.assert(
      fc.property(bytes, cuts, fc.boolean(), fc.constantFrom(false, true, "x-amz-checksum-crc32"), (body, c, signed, trailer) => {
        expectContained(() => decode(body, c, { signed: signed ? signing() : undefined, trailerExpected: trailer }), isS3AuthError);
      }),
      fuzzParams(2),
    );
  });
});

describe("SigV4 canonicalisation and presigned queries", () => {
  const SECRET = "fuzz/secret+KEY";
  // aws4 stamps presigned URLs with the wall clock, so the verifier's clock is "now" too.
  const NOW = Date.now();
  const lookupSecret = (id: string) => (id === "FUZZKEY" ? SECRET : undefined);
  const segment = fc.string({ unit: fc.constantFrom(..."abcXYZ019-_.~ !*'()$@:=+,;üé中文".split("")), minLength: 1, maxLength: 12 });
  // Unique keys: for s3, aws4 signs only the first value of a repeated parameter, unlike AWS's spec (and Kura).
  const queryPairs = fc.uniqueArray(fc.tuple(fc.stringMatching(/^[a-z][a-z0-9-]{0,8}$/), fc.string({ maxLength: 10 })), { maxLength: 4, selector: ([k]) => k });

  function signed(segments: string[], pairs: [string, string][], presigned: boolean) {
    const path = `/s3/kura/${segments.map(encodeURIComponent).join("/")}`;
    const query = pairs.map(([k, v]) => `${k}=${encodeURIComponent(v)}`).join("&");
    const opts = aws4.sign(
      {
        host: "127.0.0.1:9000",
        path: query ? `${path}?${query}` : path,
        method: "GET",
        service: "s3",
        region: "auto",
        signQuery: presigned,
        headers: presigned ? {} : { "X-Amz-Date": formatAmzDate(NOW), "X-Amz-Content-Sha256": EMPTY_SHA256 },
      } as aws4.Request,
      { accessKeyId: "FUZZKEY", secretAccessKey: SECRET },
    );
    // aws4 adds the Host header it signed.
    const headers = Object.entries(opts.headers ?? {}).map(([k, v]) => [k, String(v)] as [string, string]);
    return { method: "GET", url: opts.path as string, headers };
  }

  test("requests signed by an independent client (aws4) verify, by header and presigned", () => {
    fc.assert(
      fc.property(fc.array(segment, { minLength: 1, maxLength: 3 }), queryPairs, fc.boolean(), (segments, pairs, presigned) => {
        const req = signed(segments, pairs, presigned);
        const auth = verifySigV4(req, { lookupSecret, now: NOW });
        expect(auth.auth).toBe(presigned ? "presigned" : "header");
      }),
      fuzzParams(),
    );
  });

  test("any tampering with a signed request is refused with an S3 error", () => {
    fc.assert(
      fc.property(
        fc.array(segment, { minLength: 1, maxLength: 3 }),
        queryPairs,
        fc.boolean(),
        fc.nat(),
        fc.constantFrom(..."aZ%/?&=+ 0".split("")),
        (segments, pairs, presigned, at, ch) => {
          const req = signed(segments, pairs, presigned);
          const pos = at % req.url.length;
          const url = req.url.slice(0, pos) + ch + req.url.slice(pos + 1);
          fc.pre(url !== req.url);
          const outcome = expectContained(() => verifySigV4({ ...req, url }, { lookupSecret, now: NOW }), isS3AuthError);
          // The only edits allowed to pass leave the canonical request unchanged (e.g. a space encoded as '+').
          if (outcome) expect(outcome.canonicalRequest).toBe(verifySigV4(req, { lookupSecret, now: NOW }).canonicalRequest);
        },
      ),
      fuzzParams(2),
    );
  });

  test("hostile Authorization headers, dates and presigned parameters are S3 errors", () => {
    // Bun refuses a request line or header block over 16 KiB (431) before any Kura code runs,
    // so request targets and header values are fuzzed up to that size, not beyond.
    const wireString = hostileString.map((x) => x.slice(0, 4096));
    const authHeader = fc.oneof(
      wireString,
      fc.tuple(wireString, wireString, wireString).map(([c, h, s]) => `AWS4-HMAC-SHA256 Credential=${c}, SignedHeaders=${h}, Signature=${s}`),
      fc.tuple(wireString, wireString).map(([h, s]) => `AWS4-HMAC-SHA256 Credential=FUZZKEY/20260101/auto/s3/aws4_request,SignedHeaders=${h},Signature=${s}`),
    );
    const presignedQuery = fc
      .record(
        {
          "X-Amz-Algorithm": fc.oneof(fc.constant("AWS4-HMAC-SHA256"), wireString),
          "X-Amz-Credential": fc.oneof(fc.constant("FUZZKEY/20260101/auto/s3/aws4_request"), wireString),
          "X-Amz-Date": fc.oneof(fc.constant(formatAmzDate(NOW)), wireString),
          "X-Amz-Expires": fc.oneof(fc.constant("300"), wireString),
          "X-Amz-SignedHeaders": fc.oneof(fc.constant("host"), wireString),
          "X-Amz-Signature": fc.oneof(fc.constant("0".repeat(64)), wireString),
        },
        { requiredKeys: ["X-Amz-Algorithm"] },
      )
      .map((q) =>
        Object.entries(q)
          .map(([k, v]) => `${k}=${v}`)
          .join("&"),
      );
    const request = fc.oneof(
      fc.record({ url: wireString.map((p) => `/s3/kura/${p}`), auth: authHeader, date: wireString, sha: wireString }).map((r) => ({
        method: "PUT",
        url: r.url,
        headers: [
          ["authorization", r.auth],
          ["x-amz-date", r.date],
          ["x-amz-content-sha256", r.sha],
          ["host", "h"],
        ] as [string, string][],
      })),
      fc
        .tuple(presignedQuery, wireString)
        .map(([q, extra]) => ({ method: "GET", url: `/s3/kura/k?${q}&${extra}`, headers: [["host", "h"]] as [string, string][] })),
    );
    fc.assert(
      fc.property(request, (req) => {
        expectContained(() => verifySigV4(req, { lookupSecret, now: NOW }), isS3AuthError);
      }),
      fuzzParams(3),
    );
  });
});

describe("Range headers", () => {
  test("any Range header yields whole, invalid, or a range inside the object", () => {
    const header = fc.oneof(
      hostileString,
      fc.tuple(fc.oneof(fc.nat(), fc.constant(""), hostileString), fc.oneof(fc.nat(), fc.constant(""), hostileString)).map(([a, b]) => `bytes=${a}-${b}`),
    );
    fc.assert(
      fc.property(fc.option(header), fc.integer({ min: 0, max: 1e12 }), (h, size) => {
        const r = expectContained(
          () => parseRange(h, size),
          () => false,
        );
        if (r === undefined || r === "unsatisfiable") return;
        expect(Number.isSafeInteger(r.start) && Number.isSafeInteger(r.end)).toBe(true);
        expect(0 <= r.start && r.start <= r.end && r.end < size).toBe(true);
      }),
      fuzzParams(3),
    );
  });
});

describe("HTTP-dates", () => {
  test("any header text parses to undefined or a whole second that formats back to an accepted form", () => {
    const mangled = fc.date({ noInvalidDate: true }).chain((d) =>
      fc.tuple(fc.nat({ max: 40 }), hostileString).map(([at, junk]) => {
        const text = d.toUTCString();
        return text.slice(0, at) + junk + text.slice(at + junk.length);
      }),
    );
    fc.assert(
      fc.property(fc.oneof(hostileString, mangled), (text) => {
        const parsed = expectContained(
          () => parseHttpDate(text),
          () => false,
        );
        if (parsed === undefined) return;
        expect(Number.isInteger(parsed / 1000)).toBe(true);
        expect(parseHttpDate(new Date(parsed).toUTCString())).toBe(parsed);
      }),
      fuzzParams(3),
    );
  });
});

describe("/i/ query parameters", () => {
  test("w and format are accepted only as allowed values; anything else is a 400 with a Chinese message", () => {
    const settings = fc.record({
      process_widths: fc.option(fc.uniqueArray(fc.integer({ min: 1, max: 8000 }), { maxLength: 5 })),
      process_formats: fc.subarray(["webp", "avif", "jpeg", "png"]),
    });
    const query = fc.array(fc.tuple(fc.oneof(fc.constantFrom("w", "format", "W", "w[]"), hostileString), fc.oneof(hostileString, fc.nat().map(String))), {
      maxLength: 5,
    });
    fc.assert(
      fc.property(settings, query, (s, pairs) => {
        const params = new URLSearchParams(pairs);
        const r = expectContained(
          () => parseDeliveryParams(params, s),
          (e) => e instanceof InvalidParamsError && httpErrorOf(e).status === 400,
        );
        if (!r) return;
        if (r.width !== null) expect(s.process_widths).toContain(r.width);
        if (r.format !== null) expect(s.process_formats).toContain(r.format);
      }),
      fuzzParams(3),
    );
  });
});

describe("referer matching", () => {
  test("any Referer is allowed or refused without throwing; patterns validate or fail with a Chinese reason", () => {
    const pattern = fc.oneof(
      hostileString,
      fc.domain(),
      fc.domain().map((d) => `*.${d}`),
    );
    fc.assert(
      fc.property(fc.option(fc.oneof(hostileString, fc.webUrl())), fc.array(pattern, { maxLength: 4 }), fc.boolean(), (referer, raw, allowEmpty) => {
        const patterns = raw
          .map((p) =>
            expectContained(
              () => validateRefererPattern(p),
              (e) => e instanceof InvalidRefererPatternError,
            ),
          )
          .filter((p): p is string => !!p);
        const ok = expectContained(
          () => refererAllowed(referer, patterns, allowEmpty),
          () => false,
        );
        expect(typeof ok).toBe("boolean");
      }),
      fuzzParams(3),
    );
  });

  test("a validated pattern matches its own host and, for *.d, subdomains only", () => {
    fc.assert(
      fc.property(fc.domain(), fc.domain(), (d, other) => {
        const exact = validateRefererPattern(d);
        expect(refererAllowed(`https://${exact}/page`, [exact], false)).toBe(true);
        const wild = validateRefererPattern(`*.${d}`);
        expect(refererAllowed(`https://img.${exact}/`, [wild], false)).toBe(true);
        expect(refererAllowed(`https://${exact}/`, [wild], false)).toBe(false);
        fc.pre(!other.toLowerCase().endsWith(exact));
        expect(refererAllowed(`https://${other}x/`, [exact, wild], false)).toBe(false);
      }),
      fuzzParams(),
    );
  });
});

describe("cookie parsing", () => {
  // Known to fail before issue 9 row 5 is fixed: `%E0%A4%A` makes decodeURIComponent throw.
  test("any Cookie header yields a value or nothing, never an exception", () => {
    const cookie = fc
      .array(fc.tuple(fc.oneof(fc.constant("kura_session"), hostileString), hostileString), { maxLength: 5 })
      .map((p) => p.map(([k, v]) => `${k}=${v}`).join("; "));
    fc.assert(
      fc.property(fc.oneof(cookie, hostileString), (header) => {
        // Header values are bytes: send the UTF-8 bytes as latin1, as a raw client would.
        const wire = Buffer.from(header, "utf8")
          .toString("latin1")
          .replace(/[\r\n\0]/g, "");
        const request = new Request("http://h/", { headers: { cookie: wire } });
        const v = expectContained(
          () => readCookie(request, "kura_session"),
          () => false,
        );
        expect(v === undefined || typeof v === "string").toBe(true);
      }),
      fuzzParams(3),
    );
  });
});

describe("rclone crypt decryption of corrupted input", () => {
  const crypt = makeCrypt("fuzz-password", "fuzz-salt");
  const isCryptError = (e: unknown) => e instanceof Error && hasChinese(e.message);

  test("a corrupted or truncated object never decrypts to bytes that were not encrypted", () => {
    fc.assert(
      fc.property(
        fc.uint8Array({ maxLength: 3_000 }),
        fc.boolean(),
        fc.array(fc.tuple(fc.nat(), fc.integer({ min: 0, max: 255 })), { maxLength: 3 }),
        fc.option(fc.nat()),
        (plain, multiBlock, flips, cut) => {
          const data = multiBlock ? Buffer.concat([Buffer.alloc(BLOCK_DATA_SIZE, 7), plain]) : plain;
          const cipher = Buffer.from(encryptBuffer(data, crypt.keys));
          for (const [pos, byte] of flips) cipher[pos % cipher.length] = byte;
          const input = cut === null ? cipher : cipher.subarray(0, cut % (cipher.length + 1));
          const out = expectContained(() => decryptBuffer(input, crypt.keys), isCryptError);
          if (!out) return;
          // rclone's format authenticates each 64 KiB block, not the block count: a cut exactly at
          // a block boundary yields an authentic prefix (rclone has the same limit). Never other bytes.
          const got = Buffer.from(out);
          expect(Buffer.from(data).subarray(0, got.length).equals(got)).toBe(true);
          if (got.length !== data.length) expect(got.length % BLOCK_DATA_SIZE).toBe(0);
        },
      ),
      fuzzParams(),
    );
  });

  test("streamed decryption of random or damaged bytes fails with a Chinese error, never hangs", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.oneof(
          fc.uint8Array({ maxLength: 500 }),
          fc.uint8Array({ maxLength: 200 }).map((b) => Buffer.concat([Buffer.from("RCLONE\0\0"), b])),
        ),
        fc.array(fc.nat({ max: 600 }), { maxLength: 4 }),
        async (bytes, cuts) => {
          const points = [...new Set(cuts.map((c) => c % (bytes.length + 1)))].sort((a, b) => a - b);
          const pieces: Uint8Array[] = [];
          let at = 0;
          for (const p of [...points, bytes.length]) {
            pieces.push(bytes.subarray(at, p));
            at = p;
          }
          const source = new ReadableStream<Uint8Array>({
            start(c) {
              for (const p of pieces) c.enqueue(p);
              c.close();
            },
          });
          let error: unknown;
          await new Response(crypt.decryptStream(source)).arrayBuffer().catch((e) => (error = e));
          // Random bytes are never a valid encrypted object (the header nonce is followed by no authentic block).
          if (bytes.length !== 32) expect(isCryptError(error)).toBe(true);
        },
      ),
      fuzzParams(),
    );
  });

  test("encrypted names: random segments are refused with a Chinese error, real ones round-trip", () => {
    fc.assert(
      fc.property(
        fc.oneof(hostileString, fc.stringMatching(/^[0-9a-v]{1,64}$/)),
        fc.array(
          fc.string({ minLength: 1, maxLength: 20 }).filter((s) => !s.includes("/")),
          { minLength: 1, maxLength: 3 },
        ),
        (junk, plainSegs) => {
          expectContained(() => crypt.decryptPath(junk), isCryptError);
          const plain = plainSegs.join("/");
          expect(crypt.decryptPath(crypt.encryptPath(plain))).toBe(plain);
        },
      ),
      fuzzParams(),
    );
  });
});
