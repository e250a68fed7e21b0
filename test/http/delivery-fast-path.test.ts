/**
 * `/i/` is answered without the general router (src/http/image-fast-path.ts). What the router
 * gave it must still hold: every answer carries nosniff and is counted under the route template
 * `/i/:id` with its status; HEAD sends the stored size as Content-Length and no body; a bad `w` is
 * a 400 JSON envelope; a segment that is not valid percent-encoding and a nested path are 404s;
 * `/i/{id}.{ext}` and a percent-encoded id reach the same image.
 */
import { beforeAll, describe, expect, test } from "bun:test";
import { adminSession } from "../helpers/client";
import { useServer } from "../helpers/fixture";
import { form, makeJpeg } from "../helpers/images";
import { metricValue } from "../helpers/metrics";

describe("/i/ fast path keeps the router's contract", () => {
  let id: string;
  let bytes: Uint8Array;
  const sample = (status: number, method = "GET") => `kura_http_requests_total{method="${method}",route="/i/:id",status="${status}"}`;

  const { server } = useServer();
  beforeAll(async () => {
    const admin = await adminSession(server);
    await admin.json("PUT", "/api/admin/config", { process_widths: [16], exif_policy: "passthrough" });
    const token = (await admin.json("POST", "/api/admin/tokens", { name: "fast" }, 201)).token;
    bytes = await makeJpeg(40, 30, 60);
    const res = await fetch(server.url("/api/upload"), { method: "POST", headers: { authorization: `Bearer ${token}` }, body: form(bytes, "f.jpg") });
    expect(res.status).toBe(200);
    id = (await res.json()).id;
  });

  test("statuses, headers and metrics", async () => {
    const before = { ok: await metricValue(server.base, sample(200)), head: await metricValue(server.base, sample(200, "HEAD")), bad: await metricValue(server.base, sample(400)), missing: await metricValue(server.base, sample(404)) };

    for (let i = 0; i < 2; i++) {
      // The second GET comes from the in-memory copy.
      const res = await fetch(server.url(`/i/${id}`));
      expect(res.status).toBe(200);
      expect(res.headers.get("x-content-type-options")).toBe("nosniff");
      expect(Buffer.from(await res.arrayBuffer()).equals(Buffer.from(bytes))).toBe(true);
    }
    const head = await fetch(server.url(`/i/${id}`), { method: "HEAD" });
    expect(head.status).toBe(200);
    expect(head.headers.get("content-length")).toBe(String(bytes.byteLength));
    expect(head.headers.get("x-kura-head-length")).toBeNull();
    expect((await head.arrayBuffer()).byteLength).toBe(0);

    const bad = await fetch(server.url(`/i/${id}?w=abc`));
    expect(bad.status).toBe(400);
    expect(bad.headers.get("x-content-type-options")).toBe("nosniff");
    expect(typeof (await bad.json()).error).toBe("string");

    for (const path of ["/i/%ZZ", "/i/nope0000"]) {
      const res = await fetch(server.url(path));
      expect(`${path} ${res.status}`).toBe(`${path} 404`);
      expect(res.headers.get("x-content-type-options")).toBe("nosniff");
    }
    expect((await fetch(server.url(`/i/${id}/x`))).status).toBe(404);
    expect((await fetch(server.url(`/i/${id}.jpg`))).status).toBe(200);
    expect((await fetch(server.url(`/i/${encodeURIComponent(id).replace(/^(.)/, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`)}`))).status).toBe(200);

    expect(await metricValue(server.base, sample(200))).toBe(before.ok + 4);
    expect(await metricValue(server.base, sample(200, "HEAD"))).toBe(before.head + 1);
    expect(await metricValue(server.base, sample(400))).toBe(before.bad + 1);
    expect(await metricValue(server.base, sample(404))).toBe(before.missing + 2);
  });
});
