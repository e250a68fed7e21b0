import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { useAdmin } from "../helpers/fixture";
import { form, makeJpeg } from "../helpers/images";
import { queryDb } from "./channels.helpers";

interface PurgeCall {
  at: number;
  path: string;
  authorization: string | null;
  files: string[];
}

/** A local stand-in for the provider's purge-by-URL endpoint; `failNext` calls answer 500. */
function startFakeCdn() {
  const calls: PurgeCall[] = [];
  const state = { failNext: 0 };
  const server = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    async fetch(req) {
      const body = (await req.json()) as { files: string[] };
      calls.push({ at: Date.now(), path: new URL(req.url).pathname, authorization: req.headers.get("authorization"), files: body.files });
      if (state.failNext > 0) {
        state.failNext--;
        return Response.json({ success: false, errors: [{ message: "busy" }] }, { status: 500 });
      }
      return Response.json({ success: true, errors: [], result: { id: "x" } });
    },
  });
  return { calls, state, base: `http://127.0.0.1:${server.port}/client/v4`, stop: () => server.stop(true) };
}

async function waitFor<T>(probe: () => T | undefined, timeoutMs = 15_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error("condition not reached in time");
    await Bun.sleep(50);
  }
}

const BASE_URL = "https://img.example.test";
const ZONE = "zone-0123abcd";
const TOKEN = "cdn-token-very-secret";
const COMPLETE = { base_url: BASE_URL, cdn_provider_zone_id: ZONE, cdn_provider_api_token: TOKEN };

describe("CDN purge (spec 4.13)", () => {
  let cdn: ReturnType<typeof startFakeCdn>;
  let seed = 1;

  beforeAll(async () => {
    cdn = startFakeCdn();
  });
  const { server, admin } = useAdmin(() => ({ env: { KURA_CDN_API_BASE: cdn.base } }));
  beforeAll(async () => {
    await admin.json("PUT", "/api/admin/config", { ...COMPLETE, process_widths: [16, 32], process_formats: ["webp", "jpeg", "png"] });
  });
  afterAll(async () => {
    cdn.stop();
  });

  const upload = async () => (await admin.json("POST", "/api/admin/upload", form(await makeJpeg(64, 48, seed++), "p.jpg"))).id as string;
  const get = async (path: string) => {
    const res = await fetch(server.url(path));
    expect(res.status).toBe(200);
    await res.arrayBuffer();
  };
  /** Each URL form for both `/i/<id>` and its extension form `/i/<id>.jpg` (all uploads here are JPEG). */
  const forms = (id: string, suffixes: string[]) => [`${BASE_URL}/i/${id}`, `${BASE_URL}/i/${id}.jpg`].flatMap((link) => suffixes.map((q) => link + q)).sort();
  const callsFor = (id: string) => cdn.calls.filter((c) => c.files.some((f) => f.startsWith(`${BASE_URL}/i/${id}`)));

  test("deleting an image purges its link and every generated variant URL at once", async () => {
    const id = await upload();
    await get(`/i/${id}?w=32&format=webp`);
    await get(`/i/${id}?format=png`);
    const started = Date.now();
    expect((await admin.request("DELETE", `/api/admin/images/${id}`)).status).toBe(204);
    const [call] = await waitFor(() => (callsFor(id).length ? callsFor(id) : undefined));
    // delete_grace_minutes is 60 by default: the purge did not wait for it.
    expect(call!.at - started).toBeLessThan(10_000);
    expect(call!.path).toBe(`/client/v4/zones/${ZONE}/purge_cache`);
    expect(call!.authorization).toBe(`Bearer ${TOKEN}`);
    // `?format=jpeg` names the stored format: it was never fetched, but it would be answered.
    expect([...call!.files].sort()).toEqual(forms(id, ["", "?format=jpeg", "?format=png", "?w=32", "?w=32&format=webp"]));
    expect(server.logs).not.toContain(TOKEN);
  });

  test("URLs answered with the original bytes (a width at or above the image's, its own format by name) are purged too", async () => {
    // A 64 px image: 64 and 128 are no resize, so these URLs got the stored file, cacheable for a
    // year, and no variant row names them (an image narrower than a configured width stayed at the CDN).
    await admin.json("PUT", "/api/admin/config", { process_widths: [16, 32, 64, 128] });
    const id = await upload();
    const served = ["?w=128", "?w=64&format=jpeg", "?format=jpeg", "?w=128&format=png"];
    for (const query of served) {
      const res = await fetch(server.url(`/i/${id}${query}`));
      expect(res.headers.get("cache-control")).toBe("public, max-age=31536000, immutable");
      await res.arrayBuffer();
    }
    expect((await admin.request("DELETE", `/api/admin/images/${id}`)).status).toBe(204);
    const calls = await waitFor(() => (callsFor(id).length ? callsFor(id) : undefined));
    const files = calls.flatMap((c) => c.files).sort();
    const wide = [64, 128].flatMap((w) => [`?w=${w}`, ...["webp", "jpeg", "png"].map((f) => `?w=${w}&format=${f}`)]);
    // `?format=png` is the 64 px PNG variant `?w=128&format=png` rendered.
    expect(files).toEqual(forms(id, ["", "?format=jpeg", "?format=png", ...wide]));
    for (const query of served) expect(files).toContain(`${BASE_URL}/i/${id}${query}`);
    await admin.json("PUT", "/api/admin/config", { process_widths: [16, 32] });
  });

  test("a batch delete purges each image; more than 100 URLs go out in calls of at most 100", async () => {
    const widths = Array.from({ length: 60 }, (_, i) => i + 1);
    await admin.json("PUT", "/api/admin/config", { process_widths: widths });
    const many = await upload();
    const plain = await upload();
    for (const w of widths) await get(`/i/${many}?w=${w}&format=webp`);
    const res = await admin.json("POST", "/api/admin/images/batch-delete", { ids: [many, plain] });
    expect(res.deleted).toBe(2);

    const expected = forms(many, ["", "?format=jpeg", ...widths.flatMap((w) => [`?w=${w}`, `?w=${w}&format=webp`])]);
    const calls = await waitFor(() => {
      const got = callsFor(many);
      return got.reduce((n, c) => n + c.files.length, 0) >= expected.length ? got : undefined;
    });
    expect(calls.length).toBe(3);
    for (const c of calls) expect(c.files.length).toBeLessThanOrEqual(100);
    expect(calls.flatMap((c) => c.files).sort()).toEqual(expected.sort());
    const [plainCall] = await waitFor(() => (callsFor(plain).length ? callsFor(plain) : undefined));
    expect([...plainCall!.files].sort()).toEqual(forms(plain, ["", "?format=jpeg"]));
    await admin.json("PUT", "/api/admin/config", { process_widths: [16, 32] });
  });

  test("an expired image swept by the cleanup loop is purged too", async () => {
    const id = (await admin.json("POST", "/api/admin/upload", form(await makeJpeg(64, 48, seed++), "ttl.jpg", { ttl: "1" }))).id as string;
    await get(`/i/${id}?format=webp`);
    await admin.json("PUT", "/api/admin/config", { cleanup_sweep_seconds: 1 });
    const [call] = await waitFor(() => (callsFor(id).length ? callsFor(id) : undefined));
    expect([...call!.files].sort()).toEqual(forms(id, ["", "?format=jpeg", "?format=webp"]));
    await admin.json("PUT", "/api/admin/config", { cleanup_sweep_seconds: 300 });
  });

  test("a failing provider is retried with backoff; the delete itself is not held up", async () => {
    const id = await upload();
    await get(`/i/${id}?w=16`);
    cdn.state.failNext = 1;
    const started = Date.now();
    expect((await admin.request("DELETE", `/api/admin/images/${id}`)).status).toBe(204);
    expect(Date.now() - started).toBeLessThan(1000);
    const [first, second] = await waitFor(() => (callsFor(id).length >= 2 ? callsFor(id) : undefined));
    expect(second!.files).toEqual(first!.files);
    expect(second!.at - first!.at).toBeGreaterThanOrEqual(900);
    await server.waitForLog(/msg=任务失败，稍后重试.*kind=cdn\.purge/);
    expect(server.logs).not.toContain(TOKEN);
  });

  test("no purge unless base_url, zone id and token are all set", async () => {
    const purgeJobsFor = (id: string) => queryDb(server, "SELECT id FROM jobs WHERE kind = 'cdn.purge' AND payload LIKE ?", `%/i/${id}%`).length;
    const deleted: string[] = [];
    const before = cdn.calls.length;
    for (const missing of ["base_url", "cdn_provider_zone_id", "cdn_provider_api_token"] as const) {
      const config = await admin.json("PUT", "/api/admin/config", { ...COMPLETE, [missing]: "" });
      expect(config.derived.cdn_purge_enabled).toBe(false);
      const id = await upload();
      await admin.json("DELETE", `/api/admin/images/${id}`, undefined, 204);
      deleted.push(id);
    }
    // The purge job is queued in the delete's own transaction: none queued means none can ever call the CDN.
    expect(deleted.map(purgeJobsFor)).toEqual([0, 0, 0]);
    expect(cdn.calls.length).toBe(before);
    // Control: complete again, and the same flow does reach the fake.
    await admin.json("PUT", "/api/admin/config", COMPLETE);
    const id = await upload();
    await admin.json("DELETE", `/api/admin/images/${id}`, undefined, 204);
    expect(purgeJobsFor(id)).toBeGreaterThan(0);
    await waitFor(() => (callsFor(id).length ? true : undefined));
  });
});
