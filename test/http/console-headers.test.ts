// The console page's framing and caching headers (audit 15 LOW-6, LOW-7): X-Frame-Options beside the
// CSP's frame-ancestors for browsers older than CSP level 2, and an ETag so that a repeat open is a 304
// instead of the whole page again; gzipped for browsers (a fifth of the bytes), under a tag of its own.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { KuraServer } from "../helpers/server";

let server: KuraServer;

beforeAll(async () => {
  server = await KuraServer.start();
}, 30_000);

afterAll(async () => {
  await server?.dispose();
});

describe("GET / (the admin console)", () => {
  test("cannot be framed: CSP frame-ancestors 'none' and X-Frame-Options DENY", async () => {
    const res = await fetch(server.url("/"));
    expect(res.status).toBe(200);
    expect(res.headers.get("content-security-policy")).toContain("frame-ancestors 'none'");
    expect(res.headers.get("x-frame-options")).toBe("DENY");
    expect(res.headers.get("referrer-policy")).toBe("same-origin");
    await res.arrayBuffer();
  });

  test("carries an ETag; If-None-Match with it (strong, weak, in a list or *) answers 304 without a body", async () => {
    const first = await fetch(server.url("/"), { headers: { "accept-encoding": "identity" } });
    const etag = first.headers.get("etag");
    const html = await first.text();
    expect(etag).toMatch(/^"[A-Za-z0-9_-]{32}"$/);
    expect(first.headers.get("cache-control")).toBe("no-cache");
    for (const header of [etag!, `W/${etag}`, `"other", ${etag}`, "*"]) {
      const again = await fetch(server.url("/"), { headers: { "if-none-match": header, "accept-encoding": "identity" } });
      expect({ header, status: again.status, body: await again.text() }).toEqual({ header, status: 304, body: "" });
      expect(again.headers.get("etag")).toBe(etag);
      expect(again.headers.get("cache-control")).toBe("no-cache");
    }
    // Another build's tag gets the page.
    const stale = await fetch(server.url("/"), { headers: { "if-none-match": '"stale-build"', "accept-encoding": "identity" } });
    expect(stale.status).toBe(200);
    expect(await stale.text()).toBe(html);
  });

  test("goes out gzipped to browsers, under its own strong tag; either tag revalidates", async () => {
    const plain = await fetch(server.url("/"), { headers: { "accept-encoding": "identity" }, decompress: false });
    const html = new Uint8Array(await plain.arrayBuffer());
    const etag = plain.headers.get("etag")!;
    const browser = { "accept-encoding": "gzip, deflate, br, zstd" };
    const res = await fetch(server.url("/"), { headers: browser, decompress: false });
    expect([res.headers.get("content-encoding"), res.headers.get("vary")]).toEqual(["gzip", "Accept-Encoding"]);
    expect(res.headers.get("content-security-policy")).toBe(plain.headers.get("content-security-policy"));
    const gzipTag = res.headers.get("etag")!;
    // A strong tag names one byte sequence: the gzipped page has a tag of its own.
    expect(gzipTag).toBe(`${etag.slice(0, -1)}-gz"`);
    const sent = new Uint8Array(await res.arrayBuffer());
    expect(sent.length).toBeLessThan(html.length * 0.5);
    expect(Buffer.from(Bun.gunzipSync(sent)).equals(Buffer.from(html))).toBe(true);
    // A browser that switched encodings still holds the page: 304 under the tag of what it would get now.
    for (const [held, headers, tag] of [
      [gzipTag, browser, gzipTag],
      [etag, browser, gzipTag],
      [gzipTag, { "accept-encoding": "identity" }, etag],
    ] as const) {
      const again = await fetch(server.url("/"), { headers: { ...headers, "if-none-match": held } });
      expect([again.status, again.headers.get("etag"), again.headers.get("vary"), await again.text()]).toEqual([304, tag, "Accept-Encoding", ""]);
    }
  });
});
