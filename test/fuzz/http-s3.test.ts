/**
 * Fuzz tier, black-box: hostile requests on the /s3/ surface of a real server — SigV4 headers,
 * presigned queries and aws-chunked bodies (XML bodies: http-s3-xml.test.ts). Property: 2xx or an S3 `<Error>` document with a Chinese message, never a 5xx, and
 * /healthz keeps answering meanwhile (the event loop is not held).
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import fc from "fast-check";
import { makeJpeg } from "../helpers/images";
import { startS3Fixture, type S3Fixture } from "../s3/s3-setup";
import { fuzzParams, hostileString } from "./fuzz-support";
import { expectS3Envelope, headerValue, probed, rawTargetText, signedS3Fetch } from "./http-probe";

let fx: S3Fixture;
let host = "";
let jpeg: Buffer;

const signedFetch = (method: string, path: string, body: Buffer | undefined, headers: Record<string, string> = {}) =>
  signedS3Fetch(fx, method, path, body, headers);

beforeAll(async () => {
  fx = await startS3Fixture({ upload_rate_per_min: 1_000_000 });
  host = new URL(fx.cred.endpoint).host;
  jpeg = await makeJpeg(16, 16, 3);
});
afterAll(() => fx.server.dispose());

describe("SigV4 and presigned queries", () => {
  test("hostile Authorization headers and dates are S3 errors", async () => {
    const auth = fc.oneof(
      hostileString,
      fc.tuple(hostileString, hostileString, hostileString).map(([c, h, s]) => `AWS4-HMAC-SHA256 Credential=${c}, SignedHeaders=${h}, Signature=${s}`),
      fc
        .tuple(hostileString, hostileString)
        .map(([h, s]) => `AWS4-HMAC-SHA256 Credential=${fx.cred.access_key_id}/20260101/auto/s3/aws4_request,SignedHeaders=${h},Signature=${s}`),
    );
    await fc.assert(
      fc.asyncProperty(
        auth,
        fc.option(hostileString),
        fc.option(hostileString),
        fc.constantFrom("GET", "PUT", "DELETE", "HEAD"),
        async (a, date, sha, method) => {
          const headers: Record<string, string> = { authorization: headerValue(a) };
          if (date !== null) headers["x-amz-date"] = headerValue(date);
          if (sha !== null) headers["x-amz-content-sha256"] = headerValue(sha);
          const answer = await probed(fx.server, () =>
            fetch(`http://${host}/s3/kura/k.jpg`, { method, headers, body: method === "PUT" ? new Uint8Array(jpeg) : undefined }),
          );
          if (method === "HEAD") expect(answer.status).toBeGreaterThanOrEqual(400);
          else expectS3Envelope(answer);
          expect(answer.status).toBeGreaterThanOrEqual(400);
        },
      ),
      fuzzParams(),
    );
  });

  test("hostile presigned query parameters are S3 errors", async () => {
    const now = new Date()
      .toISOString()
      .replace(/[-:]/g, "")
      .replace(/\.\d{3}/, "");
    // 1 KiB per parameter (and for the extra one) keeps the whole target under the 16 KiB Bun accepts
    // at all; a longer one Bun refuses itself, before any handler runs.
    const param = (good: string) =>
      fc.oneof(
        fc.constant(good),
        hostileString.map((s) => rawTargetText(s).slice(0, 1024)),
      );
    const query = fc.record({
      "X-Amz-Algorithm": param("AWS4-HMAC-SHA256"),
      "X-Amz-Credential": param(`${fx.cred.access_key_id}%2F${now.slice(0, 8)}%2Fauto%2Fs3%2Faws4_request`),
      "X-Amz-Date": param(now),
      "X-Amz-Expires": param("300"),
      "X-Amz-SignedHeaders": param("host"),
      "X-Amz-Signature": param("0".repeat(64)),
    });
    await fc.assert(
      fc.asyncProperty(query, fc.option(hostileString), async (q, extra) => {
        const qs =
          Object.entries(q)
            .map(([k, v]) => `${k}=${v}`)
            .join("&") + (extra === null ? "" : `&${rawTargetText(extra).slice(0, 1024)}`);
        const a = await probed(fx.server, () => fetch(`http://${host}/s3/kura/k.jpg?${qs}`));
        expectS3Envelope(a);
        expect(a.status).toBeGreaterThanOrEqual(400);
      }),
      fuzzParams(),
    );
  });
});

describe("aws-chunked bodies", () => {
  test("a PutObject with any aws-chunked framing stores the image or is an S3 error", async () => {
    const frame = (data: Buffer) => Buffer.concat([Buffer.from(`${data.length.toString(16)}\r\n`), data, Buffer.from("\r\n")]);
    const body = fc.record({
      pieces: fc.array(fc.nat({ max: jpeg.length }), { maxLength: 4 }),
      flips: fc.array(fc.tuple(fc.nat(), fc.integer({ min: 0, max: 255 })), { maxLength: 3 }),
      junk: fc.option(hostileString),
      declared: fc.option(fc.oneof(fc.nat(), hostileString)),
    });
    await fc.assert(
      fc.asyncProperty(body, async (b) => {
        const cuts = [...new Set(b.pieces)].sort((x, y) => x - y);
        const frames: Buffer[] = [];
        let at = 0;
        for (const c of [...cuts, jpeg.length]) {
          if (c > at) frames.push(frame(jpeg.subarray(at, c)));
          at = c;
        }
        const raw = b.junk === null ? Buffer.concat([...frames, Buffer.from("0\r\n\r\n")]) : Buffer.from(b.junk);
        for (const [pos, byte] of b.flips) if (raw.length) raw[pos % raw.length] = byte;
        const declared = b.declared === null ? String(jpeg.length) : headerValue(String(b.declared));
        const a = await probed(fx.server, () =>
          signedFetch("PUT", "/s3/kura/fuzz/chunked.jpg", raw, {
            "X-Amz-Content-Sha256": "STREAMING-UNSIGNED-PAYLOAD-TRAILER",
            "Content-Encoding": "aws-chunked",
            "X-Amz-Decoded-Content-Length": declared,
          }),
        );
        expectS3Envelope(a);
      }),
      fuzzParams(),
    );
  });
});

test("after all of it the server is alive, answers, and logged no internal error", async () => {
  expect(fx.server.proc.exitCode).toBeNull();
  expect((await fetch(fx.server.url("/healthz"))).status).toBe(200);
  expect(fx.server.logs.split("\n").filter((l) => /level=ERROR/.test(l))).toEqual([]);
});
