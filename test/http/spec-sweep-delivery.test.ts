/**
 * Spec sweep, delivery (spec 4.4, 4.5, 4.12): hotlink 403s count as public access, the thumb
 * endpoint answers /i/'s headers and redirects in redirect mode, and S3 input errors are
 * `rejected` uploads in the upload-duration metric.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import aws4 from "aws4";
import { createHash } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { useAdmin } from "../helpers/fixture";
import { form, makeJpeg } from "../helpers/images";
import { metricValue } from "../helpers/metrics";
import { waitFor, waitReplicaState } from "./channels.helpers";

describe("spec sweep: delivery", () => {
  const dirs: string[] = [];

  const { server, admin } = useAdmin();
  beforeAll(async () => {
    await admin.json("PUT", "/api/admin/config", { process_widths: [16, 32], process_formats: ["webp", "jpeg"], activity_flush_seconds: 1 });
  });
  afterAll(async () => {
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  });

  test("item 6: a hotlink 403 counts as a public access, a 400 does not", async () => {
    const { id } = await admin.json("POST", "/api/admin/upload", form(await makeJpeg(40, 30, 61), "hot.jpg"));
    const rule = await admin.json("POST", "/api/admin/referer-whitelist", { pattern: "allowed.example" }, 201);
    try {
      // The 400 goes first: had it counted, it would be flushed no later than the 403.
      expect((await fetch(server.url(`/i/${id}?w=17`), { headers: { referer: "https://allowed.example/" } })).status).toBe(400);
      const rejected = await fetch(server.url(`/i/${id}`), { headers: { referer: "https://evil.example/page" } });
      expect(rejected.status).toBe(403);
      // Nothing else touches this image: the count only moves if the 403 counted.
      const detail = await waitFor(
        () => admin.json("GET", `/api/admin/images/${id}`),
        (d) => d.access_count >= 1,
        10_000,
        "the 403 to be counted",
      );
      expect(detail.access_count).toBe(1);
      expect(detail.last_access_at).toMatch(/^\d{4}-/);
    } finally {
      await admin.json("DELETE", `/api/admin/referer-whitelist/${rule.id}`, undefined, 204);
    }
  });

  test("item 10: the thumb endpoint carries the headers of /i/ (spec 4.4: headers as in 4.5)", async () => {
    const { id } = await admin.json("POST", "/api/admin/upload", form(await makeJpeg(40, 30, 62), "thumb.jpg"));
    const pick = (res: Response) => ["cache-control", "etag", "vary", "last-modified"].map((h) => res.headers.get(h));
    for (const query of ["", "?w=16", "?format=webp"]) {
      const accept = { accept: "image/webp,*/*" };
      const pub = await fetch(server.url(`/i/${id}${query}`), { headers: accept });
      const thumb = await admin.request("GET", `/api/admin/images/${id}/thumb${query}`, undefined, accept);
      expect([pub.status, thumb.status]).toEqual([200, 200]);
      expect(pick(thumb)).toEqual(pick(pub));
      expect(thumb.headers.get("cache-control")).toBe("public, max-age=31536000, immutable");
      const etag = thumb.headers.get("etag")!;
      const again = await admin.request("GET", `/api/admin/images/${id}/thumb${query}`, undefined, { ...accept, "if-none-match": etag });
      expect(again.status).toBe(304);
      expect(pick(again).slice(0, 3)).toEqual(pick(pub).slice(0, 3));
    }
  });

  test("the thumb endpoint in redirect mode: originals 302 like /i/, processed requests are served", async () => {
    const dir = mkdtempSync(join(tmpdir(), "kura-sweep-direct-"));
    dirs.push(dir);
    const ch = await admin.json(
      "POST",
      "/api/admin/channels",
      { name: "direct", driver: "local", config: { path: dir, public_base_url: "https://direct.example.com/k/" }, priority: 50, allow_direct_link: true },
      201,
    );
    const { id } = await admin.json("POST", "/api/admin/upload", form(await makeJpeg(40, 30, 63), "redirect.jpg"));
    await waitReplicaState(admin, id, ch.id, "done");
    await admin.json("PUT", "/api/admin/config", { access_mode: "redirect" });
    try {
      const pub = await fetch(server.url(`/i/${id}`), { redirect: "manual" });
      const thumb = await admin.request("GET", `/api/admin/images/${id}/thumb`);
      expect([pub.status, thumb.status]).toEqual([302, 302]);
      expect(thumb.headers.get("location")).toBe(pub.headers.get("location"));
      expect(thumb.headers.get("location")).toStartWith("https://direct.example.com/k/img/");
      expect(thumb.headers.get("cache-control")).toBe("no-store");
      expect(thumb.headers.get("etag")).toBeNull();
      // Processing is never redirected, even when it comes down to the stored bytes: a width at or
      // above the image's (40 px; 64 is allowed here) or its own format asked for by name.
      const resized = await admin.request("GET", `/api/admin/images/${id}/thumb?w=16`);
      expect(resized.status).toBe(200);
      expect(resized.headers.get("content-type")).toBe("image/jpeg");
      await admin.json("PUT", "/api/admin/config", { process_widths: [16, 32, 64] });
      for (const query of ["?w=64", "?format=jpeg", "?w=64&format=jpeg"]) {
        const res = await fetch(server.url(`/i/${id}${query}`), { redirect: "manual" });
        expect({ query, status: res.status, location: res.headers.get("location") }).toEqual({ query, status: 200, location: null });
        expect(res.headers.get("content-type")).toBe("image/jpeg");
        await res.arrayBuffer();
      }
    } finally {
      await admin.json("PUT", "/api/admin/config", { access_mode: "proxy", process_widths: [16, 32] });
    }
    expect((await admin.request("GET", `/api/admin/images/${id}/thumb`)).status).toBe(200);
  });

  test("item 7: S3 input errors (BadDigest, EntityTooLarge) are rejected uploads, not failed ones", async () => {
    const token = await admin.json("POST", "/api/admin/tokens", { name: "sweep-metric" }, 201);
    const cred = await admin.json("POST", `/api/admin/tokens/${token.id}/s3-credential`);
    const put = (key: string, body: Buffer, headers: Record<string, string> = {}) => {
      const url = new URL(server.base);
      const req = aws4.sign(
        { host: url.host, path: `/s3/kura/${key}`, method: "PUT", service: "s3", region: "us-east-1", headers, body },
        { accessKeyId: cred.access_key_id, secretAccessKey: cred.secret_access_key },
      );
      return fetch(server.url(`/s3/kura/${key}`), { method: "PUT", headers: req.headers as Record<string, string>, body: new Uint8Array(body) });
    };
    const rejected = () => metricValue(server.base, 'kura_upload_duration_seconds_count{outcome="rejected"}');
    const failed = () => metricValue(server.base, 'kura_upload_duration_seconds_count{outcome="failed"}');
    const [rejected0, failed0] = [await rejected(), await failed()];

    const jpeg = await makeJpeg(30, 30, 64);
    const badDigest = await put("bad.jpg", jpeg, { "content-md5": createHash("md5").update("other").digest("base64") });
    expect(badDigest.status).toBe(400);
    expect(await badDigest.text()).toContain("<Code>BadDigest</Code>");
    await admin.json("PUT", "/api/admin/config", { max_upload_mb: 1 });
    try {
      const tooLarge = await put("large.jpg", Buffer.alloc(1024 * 1024 + 4096, 7));
      expect(await tooLarge.text()).toContain("<Code>EntityTooLarge</Code>");
    } finally {
      await admin.json("PUT", "/api/admin/config", { max_upload_mb: 20 });
    }
    expect(await rejected()).toBe(rejected0 + 2);
    expect(await failed()).toBe(failed0);
  });
});
