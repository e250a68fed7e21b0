/**
 * `/i/` is answered without the general router (src/http/image-fast-path.ts). What the router
 * gave it must still hold: every answer carries nosniff and is counted under the route template
 * `/i/:id` with its status; HEAD sends the stored size as Content-Length and no body; a bad `w` is
 * a 400 JSON envelope; a segment that is not valid percent-encoding and a nested path are 404s;
 * `/i/{id}.{ext}` and a percent-encoded id reach the same image.
 *
 * Hot answers reuse response headers prepared once per cached image row and representation;
 * they must be exactly the headers the first (cold) answer had, follow a settings change at
 * once, and never leak between `/i/` and `/o/` (which share the cached row).
 */
import { beforeAll, describe, expect, test } from "bun:test";
import { adminSession } from "../helpers/client";
import { useServer } from "../helpers/fixture";
import { form, makeJpeg } from "../helpers/images";
import { metricValue } from "../helpers/metrics";

describe("/i/ fast path keeps the router's contract", () => {
  let id: string;
  let bytes: Uint8Array;
  let admin: Awaited<ReturnType<typeof adminSession>>;
  let userId: string;
  const sample = (status: number, method = "GET") => `kura_http_requests_total{method="${method}",route="/i/:id",status="${status}"}`;

  const { server } = useServer();
  beforeAll(async () => {
    admin = await adminSession(server);
    await admin.json("PUT", "/api/admin/config", { process_widths: [16], exif_policy: "passthrough" });
    userId = (await admin.json("GET", "/api/admin/me")).user.id;
    const token = (await admin.json("POST", "/api/admin/tokens", { name: "fast" }, 201)).token;
    bytes = await makeJpeg(40, 30, 60);
    const res = await fetch(server.url("/api/upload"), {
      method: "POST",
      headers: { authorization: `Bearer ${token}` },
      body: form(bytes, "f.jpg", { object_key: "fast/f.jpg" }),
    });
    expect(res.status).toBe(200);
    id = (await res.json()).id;
  });

  test("statuses, headers and metrics", async () => {
    const before = {
      ok: await metricValue(server.base, sample(200)),
      head: await metricValue(server.base, sample(200, "HEAD")),
      bad: await metricValue(server.base, sample(400)),
      missing: await metricValue(server.base, sample(404)),
    };

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

  /** Every header except Date, as one comparable object. */
  const headerSet = (res: Response) => Object.fromEntries([...res.headers].filter(([k]) => k !== "date"));

  test("hot answers carry exactly the headers of the first answer, per representation and area", async () => {
    const cases: [string, Record<string, string>][] = [
      [`/i/${id}?w=16`, { accept: "image/webp" }],
      [`/i/${id}?w=16`, {}],
      [`/i/${id}?format=png`, {}],
      [`/i/${id}`, {}],
      [`/i/${id}.jpg`, {}],
      [`/o/${userId}/fast/f.jpg`, {}],
      [`/i/${id}`, {}],
    ];
    for (const [path, headers] of cases) {
      const first = await fetch(server.url(path), { headers });
      const firstBody = Buffer.from(await first.arrayBuffer());
      for (let i = 0; i < 2; i++) {
        const again = await fetch(server.url(path), { headers });
        expect({ path, headers, ...headerSet(again) }).toEqual({ path, headers, ...headerSet(first) });
        expect(Buffer.from(await again.arrayBuffer()).equals(firstBody)).toBe(true);
      }
    }
    // The same cached row behind both areas: each keeps its own Cache-Control.
    expect((await fetch(server.url(`/o/${userId}/fast/f.jpg`))).headers.get("cache-control")).toBe("public, no-cache");
    expect((await fetch(server.url(`/i/${id}`))).headers.get("cache-control")).toBe("public, max-age=31536000, immutable");
  });

  test("a settings change shows in the very next hot answer", async () => {
    const vary = async () => (await fetch(server.url(`/i/${id}`))).headers.get("vary");
    expect(await vary()).toBe("Accept");
    expect(await vary()).toBe("Accept");
    // Without WebP nothing is negotiated any more, so the answer no longer varies on Accept.
    await admin.json("PUT", "/api/admin/config", { process_formats: ["jpeg", "png"] });
    expect(await vary()).toBeNull();
    await admin.json("PUT", "/api/admin/config", { process_formats: ["webp", "jpeg", "png"] });
    expect(await vary()).toBe("Accept");
  });

  test("error answers of the fast path carry nosniff too", async () => {
    const range = await fetch(server.url(`/i/${id}`), { headers: { range: `bytes=${bytes.byteLength + 10}-` } });
    expect(range.status).toBe(416);
    expect(range.headers.get("x-content-type-options")).toBe("nosniff");
    const partial = await fetch(server.url(`/i/${id}`), { headers: { range: "bytes=0-9" } });
    expect(partial.status).toBe(206);
    expect(partial.headers.get("content-length")).toBe("10");
    expect(partial.headers.get("x-content-type-options")).toBe("nosniff");
  });
});
