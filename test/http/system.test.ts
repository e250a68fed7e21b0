import { describe, expect, test } from "bun:test";
import { parse } from "yaml";
import { adminSession, expectError } from "../helpers/client";
import { useServer } from "../helpers/fixture";
import { KuraServer } from "../helpers/server";

const metricLines = (text: string, name: string) => text.split("\n").filter((l) => l.startsWith(name));

describe("system endpoints", () => {
  const { server } = useServer();

  test("/healthz answers ok in plain text without authentication", async () => {
    const res = await fetch(server.url("/healthz"));
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toContain("text/plain");
    expect(await res.text()).toBe("ok");
  });

  test("/api/openapi.yaml serves the embedded OpenAPI 3.1 document; /api/docs renders that same file", async () => {
    const res = await fetch(server.url("/api/openapi.yaml"));
    expect(res.status).toBe(200);
    const doc = parse(await res.text());
    expect(doc.openapi).toBe("3.1.0");
    expect(doc.paths["/api/admin/auth/login"].post.summary).toMatch(/[\u4e00-\u9fff]/);
    const docs = await (await fetch(server.url("/api/docs"))).text();
    expect(docs).toContain("/api/openapi.yaml");
  });

  test("the API reference's script and openapi.yaml go out gzipped to clients that accept it, as stored to the others", async () => {
    for (const [path, type] of [
      ["/api/docs/standalone.js", "text/javascript; charset=utf-8"],
      ["/api/openapi.yaml", "application/yaml; charset=utf-8"],
    ]) {
      const plain = await fetch(server.url(path), { headers: { "accept-encoding": "identity" }, decompress: false });
      const stored = new Uint8Array(await plain.arrayBuffer());
      expect([plain.headers.get("content-encoding"), plain.headers.get("vary"), plain.headers.get("content-type")]).toEqual([null, "Accept-Encoding", type]);
      for (const accept of ["gzip, deflate, br, zstd", "br;q=1, *;q=0.5", "gzip"]) {
        const res = await fetch(server.url(path), { headers: { "accept-encoding": accept }, decompress: false });
        expect([res.headers.get("content-encoding"), res.headers.get("vary"), res.headers.get("content-type")]).toEqual(["gzip", "Accept-Encoding", type]);
        expect(res.headers.get("x-content-type-options")).toBe("nosniff");
        const sent = new Uint8Array(await res.arrayBuffer());
        expect(sent.length).toBeLessThan(stored.length * 0.35);
        expect(Buffer.from(Bun.gunzipSync(sent)).equals(Buffer.from(stored))).toBe(true);
      }
      for (const accept of ["gzip;q=0, *", "br", "*;q=0"]) {
        const res = await fetch(server.url(path), { headers: { "accept-encoding": accept }, decompress: false });
        expect(res.headers.get("content-encoding")).toBeNull();
        expect(new Uint8Array(await res.arrayBuffer()).length).toBe(stored.length);
      }
    }
  });

  test("openapi.yaml is revalidated (no-cache, ETag, 304), not downloaded again on every visit of the docs", async () => {
    const plain = await fetch(server.url("/api/openapi.yaml"), { headers: { "accept-encoding": "identity" } });
    await plain.arrayBuffer();
    const etag = plain.headers.get("etag")!;
    expect([plain.headers.get("cache-control"), etag]).toEqual(["no-cache", expect.stringMatching(/^"[A-Za-z0-9_-]{32}"$/)]);
    const gzipped = await fetch(server.url("/api/openapi.yaml"), { headers: { "accept-encoding": "gzip" }, decompress: false });
    await gzipped.arrayBuffer();
    expect(gzipped.headers.get("etag")).toBe(`${etag.slice(0, -1)}-gz"`);
    for (const held of [etag, gzipped.headers.get("etag")!]) {
      const again = await fetch(server.url("/api/openapi.yaml"), { headers: { "accept-encoding": "gzip", "if-none-match": held } });
      expect([again.status, await again.text()]).toEqual([304, ""]);
    }
    const changed = await fetch(server.url("/api/openapi.yaml"), { headers: { "if-none-match": '"an-older-build"' } });
    expect([changed.status, (await changed.text()).startsWith("openapi: 3.1.0")]).toEqual([200, true]);
  });

  test("the API reference's 4 MB script is revalidated after its hour (ETag, 304), not downloaded again", async () => {
    const first = await fetch(server.url("/api/docs/standalone.js"), { headers: { "accept-encoding": "gzip" }, decompress: false });
    await first.arrayBuffer();
    const etag = first.headers.get("etag");
    expect([first.headers.get("cache-control"), etag]).toEqual(["public, max-age=3600", expect.stringMatching(/^"docs-[0-9a-z]+-gz"$/)]);
    const again = await fetch(server.url("/api/docs/standalone.js"), { headers: { "accept-encoding": "gzip", "if-none-match": etag! } });
    expect([again.status, await again.text()]).toEqual([304, ""]);
  });

  test("every response carries nosniff; unknown routes and bad JSON get the envelope", async () => {
    const res = await fetch(server.url("/api/admin/nope"));
    expect(res.headers.get("x-content-type-options")).toBe("nosniff");
    await expectError(res, 404);
    const bad = await fetch(server.url("/api/admin/auth/login"), { method: "POST", headers: { "content-type": "application/json" }, body: "{{" });
    await expectError(bad, 400);
  });

  test("metrics count requests by route template, never raw paths; /healthz and /metrics are not counted", async () => {
    const admin = await adminSession(server);
    await admin.request("PUT", "/api/admin/users/u-does-not-exist", {});
    await admin.request("PUT", "/api/admin/users/u-also-missing", {});
    // The router answers them with a trailing slash too: neither spelling is counted.
    for (const path of ["/healthz", "/metrics", "/healthz/", "/metrics/"]) await (await fetch(server.url(path))).arrayBuffer();
    const res = await fetch(server.url("/metrics"));
    expect(res.status).toBe(200);
    const text = await res.text();
    const lines = metricLines(text, "kura_http_requests_total");
    expect(lines).toContain('kura_http_requests_total{method="PUT",route="/api/admin/users/:id",status="404"} 2');
    expect(text).not.toContain("u-does-not-exist");
    expect(text).not.toContain('route="/healthz"');
    expect(text).not.toContain('route="/metrics"');
    expect(lines.filter((l) => l.includes('route="unmatched"') && l.includes('status="200"'))).toEqual([]);
    expect(metricLines(text, "kura_http_request_duration_seconds_bucket").length).toBeGreaterThan(0);
    // prom-client default metrics are exported too.
    expect(text).toContain("process_cpu_user_seconds_total");
  });
});

describe("metrics allowlist", () => {
  const scrape = async (env: Record<string, string>, headers: Record<string, string> = {}) => {
    const server = await KuraServer.start({ env });
    try {
      const res = await fetch(server.url("/metrics"), { headers });
      return { status: res.status, body: await res.text() };
    } finally {
      await server.dispose();
    }
  };

  test("unset allows loopback (default: loopback and private ranges)", async () => {
    expect((await scrape({ KURA_METRICS_ALLOW: undefined as unknown as string })).status).toBe(200);
  });

  test("empty or whitespace closes /metrics to everyone", async () => {
    for (const value of ["", "   "]) {
      const r = await scrape({ KURA_METRICS_ALLOW: value });
      expect(r.status).toBe(403);
      expect(JSON.parse(r.body).error).toMatch(/[\u4e00-\u9fff]/);
    }
  });

  test("a set value replaces the default list", async () => {
    expect((await scrape({ KURA_METRICS_ALLOW: "10.0.0.0/8" })).status).toBe(403);
    expect((await scrape({ KURA_METRICS_ALLOW: "10.0.0.0/8, 127.0.0.1" })).status).toBe(200);
  });

  test("the client address is resolved through trusted proxies only", async () => {
    // Untrusted peer: X-Forwarded-For is ignored.
    expect((await scrape({ KURA_METRICS_ALLOW: "10.0.0.0/8" }, { "x-forwarded-for": "10.1.2.3" })).status).toBe(403);
    // Trusted loopback proxy: the forwarded client decides.
    const trusted = { KURA_METRICS_ALLOW: "10.0.0.0/8", KURA_TRUSTED_PROXIES: "127.0.0.1" };
    expect((await scrape(trusted, { "x-forwarded-for": "10.1.2.3" })).status).toBe(200);
    expect((await scrape(trusted, { "x-forwarded-for": "203.0.113.7" })).status).toBe(403);
    // A client cannot smuggle an allowed address in front of its real one.
    expect((await scrape(trusted, { "x-forwarded-for": "10.1.2.3, 203.0.113.7" })).status).toBe(403);
  });
});

describe("JSON body bound", () => {
  test("bodies over 1 MiB outside the upload routes are 413, declared or chunked", async () => {
    const server = await KuraServer.start();
    try {
      const admin = await adminSession(server);
      const big = JSON.stringify({ name: "x".repeat(2 * 1024 * 1024), password: "password-1" });
      await expectError(await admin.request("POST", "/api/admin/users", big, { "content-type": "application/json" }), 413);
      let sent = 0;
      const chunked = new ReadableStream<Uint8Array>({
        pull(controller) {
          if (sent > 4 * 1024 * 1024) return controller.close();
          sent += 65536;
          controller.enqueue(new Uint8Array(65536).fill(0x20));
        },
      });
      const res = await fetch(server.url("/api/admin/users"), {
        method: "POST",
        headers: { cookie: admin.cookie, "x-csrf-token": admin.csrf, "content-type": "application/json" },
        body: chunked,
        duplex: "half",
      } as RequestInit);
      await expectError(res, 413);
      // Small chunked JSON still works.
      const small = new TextEncoder().encode(JSON.stringify({ name: "chunky", password: "password-1" }));
      const ok = await fetch(server.url("/api/admin/users"), {
        method: "POST",
        headers: { cookie: admin.cookie, "x-csrf-token": admin.csrf, "content-type": "application/json" },
        body: new ReadableStream({ start: (c) => (c.enqueue(small), c.close()) }),
        duplex: "half",
      } as RequestInit);
      expect(ok.status).toBe(201);
    } finally {
      await server.dispose();
    }
  });
});
