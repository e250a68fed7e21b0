/**
 * A streamed upload body is read only as far as an acceptable one could go. Without a declared
 * length, a form whose file part is within the cap but whose bytes never end elsewhere (an
 * endless preamble, an endless part the route skips) was read until Bun's own limit of ~10 GiB,
 * holding its upload slot the whole time (the four anonymous Chevereto slots too); an aws-chunked
 * S3 body of one-byte chunks made the server verify a signature per byte. Each surface now stops
 * reading once the largest acceptable body has arrived, with its own 413 / EntityTooLarge.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { startS3Fixture, signedRequest, type S3Fixture } from "../s3/s3-setup";

/** The cap under test: 1 MiB images, so the largest acceptable body is a few MiB on every surface. */
const MAX_UPLOAD_MB = 1;
/** What a client may send before the answer if the server stops near the cap (socket buffers included). */
const READ_BOUND = 24 * 1024 * 1024;
/** What the client is ready to send: far more than any acceptable body. */
const OFFERED = 512 * 1024 * 1024;
const BOUNDARY = "kuracap";

let f: S3Fixture;
let token = "";
beforeAll(async () => {
  f = await startS3Fixture({ max_upload_mb: MAX_UPLOAD_MB });
  token = (await f.admin.json("POST", "/api/admin/tokens", { name: "caps" }, 201)).token;
});
afterAll(() => f.server.dispose());

/**
 * A body that starts with `head`, then repeats `filler` until OFFERED bytes were taken; counts what
 * was taken. Past READ_BOUND it waits for the answer (bounded) before producing more: a server that
 * stopped reading near the cap answers meanwhile, so what the client took stays within the bound
 * however slowly a loaded machine answers (Bun's fetch pulls the stream without backpressure, so a
 * late answer let it take 49 MB once in CI); a server still reading never answers, and the producer
 * then goes on past the bound.
 */
function endless(head: string, filler: Uint8Array) {
  const sent = { bytes: 0 };
  let answered = false;
  let wake = () => {};
  const answer = new Promise<void>((resolve) => {
    wake = resolve;
  });
  const stream = new ReadableStream<Uint8Array>({
    start(c) {
      c.enqueue(new TextEncoder().encode(head));
    },
    async pull(c) {
      if (!answered && sent.bytes >= READ_BOUND) await Promise.race([answer, Bun.sleep(10_000)]);
      if (answered || sent.bytes >= OFFERED) return c.close();
      sent.bytes += filler.length;
      c.enqueue(filler);
    },
  });
  const markAnswered = () => {
    answered = true;
    wake();
  };
  return { stream, sent, markAnswered };
}

const junk = new Uint8Array(256 * 1024).fill(0x61);
/** An endless preamble before the first delimiter, or an endless file part under another name than the route reads. */
const shapes = {
  preamble: "",
  "skipped part": `--${BOUNDARY}\r\nContent-Disposition: form-data; name="other"; filename="x.bin"\r\n\r\n`,
};

async function send(path: string, headers: Record<string, string>, head: string) {
  const { stream, sent, markAnswered } = endless(head, junk);
  const res = await fetch(f.server.url(path), {
    method: "POST",
    headers: { "content-type": `multipart/form-data; boundary=${BOUNDARY}`, ...headers },
    body: stream,
    duplex: "half",
  } as RequestInit);
  const taken = sent.bytes;
  markAnswered();
  return { status: res.status, text: await res.text(), sent: taken };
}

describe("an endless streamed upload form is refused near the cap", () => {
  const surfaces: [string, string, () => Record<string, string>, string, number?][] = [
    ["console upload", "/api/admin/upload", () => ({ cookie: f.admin.cookie, "x-csrf-token": f.admin.csrf }), "图片超过大小上限（1 MB）"],
    ["token upload", "/api/upload", () => ({ authorization: `Bearer ${token}` }), "图片超过大小上限（1 MB）"],
    // Lsky answers the refusal with HTTP 200 and status false (its clients show the message only then).
    ["Lsky Pro upload", "/api/v1/upload", () => ({ authorization: `Bearer ${token}` }), "图片超过大小上限（1 MB）", 200],
    ["Chevereto upload, key in a header", "/api/1/upload", () => ({ "x-api-key": token }), "图片超过大小上限（1 MB）"],
    // Anonymous: the key would come inside the form, after the endless part.
    ["Chevereto upload, key in the form", "/api/1/upload", () => ({}), "图片超过大小上限（1 MB）"],
  ];
  for (const [label, path, headers, message, status = 413] of surfaces) {
    for (const [shape, head] of Object.entries(shapes)) {
      test(`${label}: ${shape}`, async () => {
        const answer = await send(path, headers(), head);
        expect(answer.status).toBe(status);
        expect(answer.text).toContain(message);
        expect(answer.sent).toBeLessThanOrEqual(READ_BOUND);
      });
    }
  }

  for (const [shape, head] of Object.entries(shapes)) {
    test(`S3 POST Object (browser form, anonymous until its policy arrives): ${shape}`, async () => {
      const answer = await send("/s3/kura", {}, head);
      expect(answer.status).toBe(400);
      expect(answer.text).toContain("<Code>EntityTooLarge</Code>");
      expect(answer.sent).toBeLessThanOrEqual(READ_BOUND);
    });
  }
});

test("an S3 PutObject in one-byte aws-chunked chunks is refused once its framing passes the cap", async () => {
  // 1,000,000 object bytes declared (within the cap), sent one per chunk, each chunk line padded
  // with an extension to ~1 KB: the body would be ~1 GB of framing that the server parses.
  const decoded = 1_000_000;
  const chunk = new TextEncoder().encode(`1;pad=${"x".repeat(1000)}\r\na\r\n`.repeat(256));
  let sent = 0;
  const stream = new ReadableStream<Uint8Array>({
    pull(c) {
      if (sent >= OFFERED) return c.close();
      sent += chunk.length;
      c.enqueue(chunk);
    },
  });
  const res = await signedRequest(f, "PUT", "/s3/kura/framing.png", {
    stream,
    headers: {
      "x-amz-content-sha256": "STREAMING-UNSIGNED-PAYLOAD-TRAILER",
      "content-encoding": "aws-chunked",
      "x-amz-decoded-content-length": String(decoded),
    },
  });
  const text = await res.text();
  expect(res.status).toBe(400);
  expect(text).toContain("<Code>EntityTooLarge</Code>");
  expect(sent).toBeLessThan(READ_BOUND);
});
