import { describe, expect, test } from "bun:test";
import { useServer } from "../helpers/fixture";
import { hostRequest, peakGrowth, type RawAnswer } from "./hardening.helpers";

const MiB = 1024 * 1024;

/** Answered by the S3 surface (an S3 XML error) rather than by a JSON route. */
const isS3Answer = (a: RawAnswer) => /<Error>/.test(a.body) && /application\/xml/i.test(a.contentType);

describe("row 1: one request path for the body cap and the router", () => {
  const { server } = useServer();

  test("a short Host cannot route a 2 MB body past the cap into a JSON route", async () => {
    const body = Buffer.from(JSON.stringify({ name: "x".repeat(2 * MiB), password: "y" }));
    for (const host of ["a", "ab", "a.b", "127.0.0.1"]) {
      const answer = await hostRequest(server, {
        method: "POST",
        path: "/s3/api/admin/auth/login",
        host,
        headers: { "content-type": "application/json" },
        body,
      });
      // Either the S3 surface owns the path, or the cap refuses it; the login validator never sees it.
      expect(answer.status === 413 || isS3Answer(answer), `Host: ${host} → ${answer.status} ${answer.body.slice(0, 200)}`).toBe(true);
      expect(answer.body).not.toContain("字段");
    }
  });

  test("the router sees the same path as the cap whatever the Host", async () => {
    for (const host of ["a", "ab", "a.b"]) {
      // Routed by the true path: an unauthenticated request to an existing route is 401, not 404.
      const me = await hostRequest(server, { method: "GET", path: "/api/admin/me", host });
      expect(me.status, `Host: ${host} → ${me.status} ${me.body}`).toBe(401);
      const big = Buffer.from(JSON.stringify({ name: "x".repeat(2 * MiB), password: "y" }));
      const login = await hostRequest(server, {
        method: "POST",
        path: "/api/admin/auth/login",
        host,
        headers: { "content-type": "application/json" },
        body: big,
      });
      expect(login.status).toBe(413);
      expect(JSON.parse(login.body).error).toMatch(/请求体过大/);
    }
  });

  test("a 256 MiB chunked body to a JSON route is 413 and the server does not buffer it", async () => {
    const chunk = Buffer.alloc(MiB, 0x20);
    for (const host of ["127.0.0.1", "a"]) {
      const { result, growth } = await peakGrowth(server, () =>
        hostRequest(server, {
          method: "POST",
          path: host === "a" ? "/s3/api/admin/auth/login" : "/api/admin/auth/login",
          host,
          headers: { "content-type": "application/json" },
          body: { chunk, count: 256 },
        }),
      );
      expect(result.status === 413 || isS3Answer(result), `Host: ${host} → ${result.status} ${result.body.slice(0, 200)}`).toBe(true);
      expect(growth).toBeLessThan(64 * MiB);
    }
    // Still serving afterwards.
    expect((await fetch(server.url("/healthz"))).status).toBe(200);
  });
});
