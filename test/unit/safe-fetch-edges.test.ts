/**
 * The URL import's download at the edges `bun run mutate safe-fetch` found untested: what the peer
 * is sent, content codings undone (and the cap applied to what they decode to), the per-hop
 * deadline ending with the headers, deadlines and cancels while the name is being resolved, a
 * declared length refused before any body byte, the 2xx range, credentials in either half, and
 * the address policy for a public answer. Real HTTP on loopback; the resolver is a test double
 * only where DNS itself is the subject.
 */
import type { TCPSocketListener } from "bun";
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { brotliCompressSync, deflateSync, gzipSync, zstdCompressSync } from "node:zlib";
import { parseAddressSet } from "../../src/net/cidr.ts";
import { checkedAddress, fetchToFile, resolveWithOs, sanitizeFileName, type UrlImportError, type FetchToFileOptions } from "../../src/net/safe-fetch.ts";
import { importRefusal } from "../helpers/url-import";

const PAYLOAD = new Uint8Array(50_000).map((_, i) => (i * 131 + 17) & 0xff);
const LOCAL = parseAddressSet("127.0.0.1/32");
/** Each coding's bytes, copied into plain ArrayBuffer-backed arrays (what Response takes). */
const ENCODED: Record<string, Uint8Array<ArrayBuffer>> = Object.fromEntries(
  Object.entries({
    gzip: gzipSync(PAYLOAD),
    "x-gzip": gzipSync(PAYLOAD),
    deflate: deflateSync(PAYLOAD),
    br: brotliCompressSync(PAYLOAD),
    zstd: zstdCompressSync(PAYLOAD),
  }).map(([coding, bytes]) => [coding, new Uint8Array(bytes)]),
);

let dir: string;
let server: ReturnType<typeof Bun.serve>;
/** A raw peer: answers every request with headers that promise a huge body, then sends nothing. */
let silent: TCPSocketListener;
let seen: Headers | undefined;
let seenMethod = "";

function route(req: Request): Response {
  const url = new URL(req.url);
  seen = req.headers;
  seenMethod = req.method;
  const p = url.pathname;
  if (p === "/encoded") {
    const coding = url.searchParams.get("coding")!;
    const body = ENCODED[coding.trim().toLowerCase()] ?? PAYLOAD;
    return new Response(body, { headers: { "content-encoding": coding, "content-type": "image/png" } });
  }
  if (p === "/status") return new Response(PAYLOAD, { status: Number(url.searchParams.get("code")) });
  if (p === "/empty") return new Response(null, { status: 204 });
  if (p === "/slow-finite") {
    let sent = 0;
    return new Response(
      new ReadableStream({
        async pull(c) {
          if (sent++ === 6) return c.close();
          await Bun.sleep(100);
          c.enqueue(new Uint8Array(10).fill(sent));
        },
      }),
    );
  }
  return new Response(PAYLOAD, { headers: { "content-type": "image/png" } });
}

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), "kura-safe-fetch-edges-"));
  server = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: route });
  silent = Bun.listen({
    hostname: "127.0.0.1",
    port: 0,
    socket: {
      data(socket) {
        socket.write("HTTP/1.1 200 OK\r\nContent-Type: image/png\r\nContent-Length: 999999999\r\n\r\n");
      },
    },
  });
});
afterAll(() => {
  server.stop(true);
  silent.stop(true);
  rmSync(dir, { recursive: true, force: true });
});

let n = 0;
const nextDest = () => join(dir, `out-${++n}.bin`);
const base = () => `http://127.0.0.1:${server.port}`;
const download = (url: string, opts: Partial<FetchToFileOptions> = {}, path = nextDest()) =>
  fetchToFile(url, path, { maxBytes: 1_000_000, allow: LOCAL, ...opts });

const refusal = (url: string, opts: Partial<FetchToFileOptions> = {}) => importRefusal(url, nextDest(), { maxBytes: 1_000_000, allow: LOCAL, ...opts });

describe("what the peer is sent", () => {
  test("one GET that names us, asks for images and for no content coding, with the URL's own Host", async () => {
    await download(`${base()}/photo.png`);
    expect(seenMethod).toBe("GET");
    expect(seen?.get("user-agent")).toBe("Kura-URL-Import/1");
    expect(seen?.get("accept")).toBe("image/*, */*;q=0.5");
    expect(seen?.get("accept-encoding")).toBe("identity");
    expect(seen?.get("host")).toBe(`127.0.0.1:${server.port}`);
  });
});

describe("content codings a peer sends anyway", () => {
  test.each(Object.keys(ENCODED).concat([" GZIP "]))("%p is decoded: the file holds the image, not its coding", async (coding) => {
    const path = nextDest();
    const got = await download(`${base()}/encoded?coding=${encodeURIComponent(coding)}`, {}, path);
    expect(got.bytes).toBe(PAYLOAD.length);
    expect(Buffer.from(readFileSync(path)).equals(Buffer.from(PAYLOAD))).toBe(true);
  });

  test("an unknown coding is stored as sent", async () => {
    const path = nextDest();
    await download(`${base()}/encoded?coding=compress`, {}, path);
    expect(Buffer.from(readFileSync(path)).equals(Buffer.from(PAYLOAD))).toBe(true);
  });

  test("the cap applies to the decoded bytes: a small gzip of a large body is too large", async () => {
    expect(ENCODED.gzip!.length).toBeLessThan(PAYLOAD.length / 2);
    const err = await refusal(`${base()}/encoded?coding=gzip`, { maxBytes: PAYLOAD.length - 1 });
    expect([err.status, err.code]).toEqual([413, "too_large"]);
  });
});

describe("deadlines and cancels", () => {
  test("the per-hop deadline ends with the headers: a body slower than it, within the whole deadline, completes", async () => {
    const got = await download(`${base()}/slow-finite`, { connectTimeoutMs: 250, timeoutMs: 10_000 });
    expect(got.bytes).toBe(60);
  });

  test("a resolver that never answers: the per-hop deadline, in Chinese", async () => {
    const started = Date.now();
    const err = await refusal("http://never.test.invalid/a.png", { resolve: () => new Promise(() => {}), connectTimeoutMs: 200 });
    expect([err.status, err.code, err.message]).toEqual([400, "timeout", "从该 URL 下载超时"]);
    expect(Date.now() - started).toBeLessThan(3_000);
  });

  test("the caller's cancel while the name resolves, and a cancel that came first (nothing resolved)", async () => {
    const ctl = new AbortController();
    setTimeout(() => ctl.abort(), 100);
    const started = Date.now();
    const during = await refusal("http://never.test.invalid/a.png", { resolve: () => new Promise(() => {}), signal: ctl.signal });
    expect([during.code, during.message]).toEqual(["aborted", "下载已取消"]);
    expect(Date.now() - started).toBeLessThan(3_000);

    const asked: string[] = [];
    const before = await refusal("http://early.test.invalid/a.png", {
      resolve: async (host) => {
        asked.push(host);
        return ["127.0.0.1"];
      },
      signal: AbortSignal.abort(),
    });
    expect(before.code).toBe("aborted");
    expect(asked).toEqual([]);
  });

  test("a declared length above the cap is refused from the headers, without waiting for a body", async () => {
    const started = Date.now();
    const err = await refusal(`http://127.0.0.1:${silent.port}/big.png`, { maxBytes: 1000, timeoutMs: 3_000 });
    expect([err.status, err.code]).toEqual([413, "too_large"]);
    expect(Date.now() - started).toBeLessThan(2_000);
  });
});

describe("statuses and URLs", () => {
  test("every 2xx is an answer, 300 and up that is no redirect is refused", async () => {
    expect((await download(`${base()}/status?code=299`)).bytes).toBe(PAYLOAD.length);
    expect((await download(`${base()}/status?code=203`)).bytes).toBe(PAYLOAD.length);
    const err = await refusal(`${base()}/status?code=300`);
    expect([err.code, err.message]).toEqual(["upstream_status", "上游服务器返回了状态码 300"]);
  });

  test("a 204 gives an empty file, for the upload's checks to refuse", async () => {
    expect((await download(`${base()}/empty`)).bytes).toBe(0);
  });

  test("a long name keeps an extension of up to 15 characters after its dot, and cuts a longer one with the rest", () => {
    const kept = sanitizeFileName(`${"a".repeat(300)}.abcdefghijklmno`)!;
    expect([kept.length, kept.endsWith("a.abcdefghijklmno")]).toEqual([200, true]);
    const cut = sanitizeFileName(`${"a".repeat(300)}.abcdefghijklmnop`)!;
    expect([cut.length, cut]).toEqual([200, "a".repeat(200)]);
  });

  test("credentials in either half of the user info are refused", async () => {
    for (const url of [`http://user@127.0.0.1:${server.port}/a.png`, `http://:secret@127.0.0.1:${server.port}/a.png`]) {
      const err = await refusal(url);
      expect([url, err.code, err.message]).toEqual([url, "bad_url", "URL 不能包含用户名或密码"]);
    }
  });
});

describe("the address policy", () => {
  const signal = new AbortController().signal;
  const answering = (addresses: string[]) => async () => addresses;

  test("a public answer passes with no allow list; a private one or a mix is refused", async () => {
    expect(await checkedAddress("img.example", answering(["93.184.216.34", "2606:2800:220:1:248:1893:25c8:1946"]), undefined, signal)).toBe("93.184.216.34");
    for (const answer of [["10.0.0.7"], ["93.184.216.34", "127.0.0.1"], ["::1"]]) {
      const err = await checkedAddress("img.example", answering(answer), undefined, signal).catch((e: unknown) => e);
      expect([answer, (err as UrlImportError).code]).toEqual([answer, "refused_address"]);
    }
    const bad = await checkedAddress("img.example", answering(["not-an-address"]), undefined, signal).catch((e: unknown) => e);
    expect((bad as UrlImportError).code).toBe("dns_failed");
  });

  test("the system resolver gives every address of a name as text", async () => {
    const addresses = await resolveWithOs("localhost");
    expect(addresses.length).toBeGreaterThan(0);
    expect(addresses.every((a) => a === "127.0.0.1" || a === "::1" || /^[\d.]+$|:/.test(a))).toBe(true);
    expect(addresses.some((a) => a === "127.0.0.1" || a === "::1")).toBe(true);
  });
});
