/**
 * Refusals of the Chevereto API v1 surface (audit LOW-12). Chevereto answers every error of its
 * API route with HTTP 400, `status_code: 400` and its own `error.code` (100 key, 120 action or
 * base64, 130 source; app/legacy/routes/api.php); Kura does the same for those. Kura's own states
 * that Chevereto's route does not have keep their status (429 and 503 with Retry-After, 415, 413).
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { makePng } from "../helpers/images";
import { type ClientFixture, specJson, startClientFixture } from "./fixture";

describe("Chevereto API v1 refusals", () => {
  let f: ClientFixture;
  let seed = 900;
  beforeAll(async () => {
    f = await startClientFixture();
  });
  afterAll(async () => {
    await f.dispose();
  });

  const endpoint = (query = "") => f.server.url(`/api/1/upload${query}`);
  const imageCount = async () => (await f.admin.json("GET", "/api/admin/images")).total as number;
  const multipart = (fields: Record<string, string | Blob>) => {
    const fd = new FormData();
    for (const [name, value] of Object.entries(fields)) {
      if (value instanceof Blob) fd.append(name, value, "a.png");
      else fd.append(name, value);
    }
    return fd;
  };
  const urlencoded = (fields: Record<string, string>, headers: Record<string, string> = {}) =>
    fetch(endpoint(), { method: "POST", headers: { "content-type": "application/x-www-form-urlencoded", ...headers }, body: new URLSearchParams(fields) });

  /** Chevereto's error answer: HTTP 400, status_code 400, its code, a Chinese message. */
  async function expectChevereto400(res: Response, code: number, method = "POST") {
    expect(res.status).toBe(400);
    const body = await specJson(res, method, "/api/1/upload");
    expect(body).toMatchObject({ status_code: 400, status_txt: "Bad Request", error: { code } });
    expect(body.error.message).toMatch(/[\u4e00-\u9fff]/);
    return res;
  }

  test("a missing or wrong key is 400 with code 100, without a 401's challenge, and nothing is stored", async () => {
    const before = await imageCount();
    const png = new Blob([new Uint8Array(await makePng(20, 20, seed++))]);
    const wrong = `kura_aaaaaaaaaaaa_${"A".repeat(43)}`;
    for (const res of [
      await fetch(endpoint(), { method: "POST", body: multipart({ key: wrong, source: png }) }),
      await fetch(endpoint(), { method: "POST", body: multipart({ source: png }) }),
      await fetch(endpoint(), { method: "POST", headers: { "x-api-key": "nonsense" }, body: multipart({ source: png }) }),
      await urlencoded({ key: wrong, source: "QUJD" }),
    ]) {
      await expectChevereto400(res, 100);
      expect(res.headers.get("www-authenticate")).toBeNull();
    }
    await expectChevereto400(await fetch(endpoint(`?key=wrong&source=${encodeURIComponent("https://example.com/a.png")}`)), 100, "GET");
    const txt = await fetch(endpoint("?format=txt&key=wrong"), { method: "POST", body: multipart({ source: png }) });
    expect(txt.status).toBe(400);
    expect(await txt.text()).toMatch(/[\u4e00-\u9fff]/);
    expect(await imageCount()).toBe(before);
  });

  test("no source, an empty one or a blank one is 400 with code 130", async () => {
    await expectChevereto400(await fetch(endpoint(), { method: "POST", body: multipart({ key: f.token }) }), 130);
    await expectChevereto400(await urlencoded({ key: f.token, source: "" }), 130);
    await expectChevereto400(await urlencoded({ key: f.token, source: "  \n " }), 130);
    await expectChevereto400(await fetch(endpoint(`?key=${encodeURIComponent(f.token)}`)), 130, "GET");
  });

  test("invalid base64, short or streamed to disk, urlencoded or a multipart text field, is 400 with code 120", async () => {
    await expectChevereto400(await urlencoded({ key: f.token, source: "not base64 at all!" }), 120);
    // Past the 8 KiB kept as text: decoded as it streams, refused where the bad character comes.
    await expectChevereto400(await urlencoded({ key: f.token, source: `${"QUJD".repeat(4096)}!!!!` }), 120);
    await expectChevereto400(await urlencoded({ key: f.token, source: "QUJD=" }), 120);
    await expectChevereto400(await fetch(endpoint(), { method: "POST", body: multipart({ key: f.token, source: "@@@@" }) }), 120);
  });

  test("an unknown action or method under /api/1/ is Chevereto's invalid action: 400 with code 120", async () => {
    for (const [method, path] of [
      ["POST", "/api/1/delete"],
      ["GET", "/api/1/"],
      ["PUT", "/api/1/upload"],
    ] as const) {
      const res = await fetch(f.server.url(path), { method });
      expect([method, path, res.status]).toEqual([method, path, 400]);
      expect(await res.json()).toEqual({
        status_code: 400,
        error: { message: expect.stringContaining("/api/1/upload"), code: 120 },
        status_txt: "Bad Request",
      });
    }
  });

  test("Kura's own states keep their status in status_code and code: 415, and 429 and 503 with Retry-After", async () => {
    const text = await fetch(endpoint(), { method: "POST", body: multipart({ key: f.token, source: new Blob(["hello"]) }) });
    expect(text.status).toBe(415);
    expect((await specJson(text, "POST", "/api/1/upload")).error.code).toBe(415);

    await f.admin.json("PUT", "/api/admin/config", { upload_rate_per_min: 1 });
    try {
      const upload = async () =>
        fetch(endpoint(), { method: "POST", body: multipart({ key: f.token, source: new Blob([new Uint8Array(await makePng(16, 16, seed++))]) }) });
      expect((await upload()).status).toBe(200);
      const limited = await upload();
      expect(limited.status).toBe(429);
      expect(limited.headers.get("retry-after")).toMatch(/^\d+$/);
      expect(await specJson(limited, "POST", "/api/1/upload")).toMatchObject({ status_code: 429, error: { code: 429 }, status_txt: "Too Many Requests" });
    } finally {
      await f.admin.json("PUT", "/api/admin/config", { upload_rate_per_min: 120 });
    }

    // One healthy channel and min_success 2: refused before anything is written, retry later.
    await f.admin.json("PUT", "/api/admin/config", { min_success: 2 });
    try {
      const unavailable = await fetch(endpoint(), {
        method: "POST",
        body: multipart({ key: f.token, source: new Blob([new Uint8Array(await makePng(16, 16, seed++))]) }),
      });
      expect(unavailable.status).toBe(503);
      expect(unavailable.headers.get("retry-after")).toMatch(/^\d+$/);
      expect(await specJson(unavailable, "POST", "/api/1/upload")).toMatchObject({ status_code: 503, error: { code: 503 } });
    } finally {
      await f.admin.json("PUT", "/api/admin/config", { min_success: 1 });
    }
  });
});
