/** The Chevereto API v1 compatible upload, sent the way ShareX's built-in Chevereto uploader and bots send it. */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { form, makeJpeg, makePng, noisePng } from "../helpers/images";
import { type ClientFixture, pngOrigin, sha256, specJson, startClientFixture } from "./fixture";

describe("Chevereto API v1", () => {
  let f: ClientFixture;
  let origin: ReturnType<typeof Bun.serve>;
  let seed = 300;
  let originImage: Buffer;
  beforeAll(async () => {
    // URL sources go through the SSRF-safe import; the test's loopback origin is allowed explicitly.
    f = await startClientFixture({ KURA_IMPORT_ALLOW: "127.0.0.1/32" });
    originImage = await makePng(50, 30, 9);
    origin = pngOrigin(originImage);
  });
  afterAll(async () => {
    origin.stop(true);
    await f.dispose();
  });

  const endpoint = (query = "") => f.server.url(`/api/1/upload${query}`);
  const imageCount = async () => (await f.admin.json("GET", "/api/admin/images")).total as number;

  /** ShareX's Chevereto uploader: multipart with the args `key` and `format=json` first, then the file as `source`. */
  function sharexForm(bytes: Uint8Array, key: string, fileName = "Screenshot.png"): FormData {
    const fd = new FormData();
    fd.append("key", key);
    fd.append("format", "json");
    fd.append("source", new Blob([new Uint8Array(bytes)]), fileName);
    return fd;
  }

  test("ShareX file upload: Chevereto's success shape, image.url serves the same bytes, thumb is a resized form", async () => {
    const png = await makePng(64, 48, seed++);
    const res = await fetch(endpoint(), { method: "POST", body: sharexForm(png, f.token) });
    expect(res.status).toBe(200);
    expect(res.headers.get("connection")).toBe("close");
    const body = await specJson(res, "POST", "/api/1/upload");
    expect(body.status_code).toBe(200);
    expect(body.status_txt).toBe("OK");
    const img = body.image;
    expect(img.url).toBe(f.server.url(`/i/${img.name}.png`));
    expect(img).toMatchObject({ extension: "png", mime: "image/png", width: 64, height: 48, size: png.length, original_filename: "Screenshot.png" });
    expect(img.md5).toBe(new Bun.CryptoHasher("md5").update(png).digest("hex"));
    // ShareX takes image.url (direct link) or url_viewer, and thumb.url as the thumbnail.
    expect(img.url_viewer).toBe(img.url);
    expect(img.thumb.url).toBe(`${img.url}?w=320`);
    expect(img.medium.url).toBe(`${img.url}?w=640`);
    const served = await fetch(img.url);
    expect(served.status).toBe(200);
    expect(sha256(await served.arrayBuffer())).toBe(sha256(png));
    const thumb = await fetch(img.thumb.url);
    expect(thumb.status).toBe(200);
    expect(thumb.headers.get("content-type")).toMatch(/^image\//);
  });

  test("the upload paths with a trailing slash (the docs' form) take files above 1 MiB as the unslashed ones do", async () => {
    const big = await noisePng(700); // ~1.5 MB: above the control-plane cap, below max_upload_mb
    expect(big.length).toBeGreaterThan(1024 * 1024);
    const chevereto = await fetch(f.server.url("/api/1/upload/"), { method: "POST", body: sharexForm(big, f.token) });
    expect([chevereto.status, (await chevereto.json()).image?.size]).toEqual([200, big.length]);
    for (const path of ["/api/v1/upload/", "/api/upload/"]) {
      const res = await fetch(f.server.url(path), { method: "POST", headers: { authorization: `Bearer ${f.token}` }, body: form(big, "big.png") });
      expect([path, res.status]).toEqual([path, 200]);
      await res.arrayBuffer();
    }
  });

  test("base64 source, urlencoded and as a multipart text field (also as a data: URL)", async () => {
    const jpeg = await makeJpeg(40, 30, seed++);
    const b64 = jpeg.toString("base64");
    const urlencoded = await fetch(endpoint(), {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded" },
      body: new URLSearchParams({ key: f.token, source: b64 }),
    });
    const a = await specJson(urlencoded, "POST", "/api/1/upload");
    expect(urlencoded.status).toBe(200);
    expect(sha256(await (await fetch(a.image.url)).arrayBuffer())).toBe(sha256(jpeg));

    const fd = new FormData();
    fd.append("key", f.token);
    fd.append("source", `data:image/jpeg;base64,${b64.replace(/(.{76})/g, "$1\n")}`);
    const multipart = await fetch(endpoint(), { method: "POST", body: fd });
    expect(multipart.status).toBe(200);
    const b = await specJson(multipart, "POST", "/api/1/upload");
    expect(b.image.extension).toBe("jpg");
    expect(sha256(await (await fetch(b.image.url)).arrayBuffer())).toBe(sha256(jpeg));
  });

  test("a base64 image larger than max_upload_mb is 413 (the same limit as any upload)", async () => {
    await f.admin.json("PUT", "/api/admin/config", { max_upload_mb: 1 });
    try {
      const big = Buffer.alloc(1024 * 1024 + 10, 7).toString("base64");
      const res = await fetch(endpoint(), {
        method: "POST",
        headers: { "content-type": "application/x-www-form-urlencoded" },
        body: new URLSearchParams({ key: f.token, source: big }),
      });
      expect(res.status).toBe(413);
      expect((await specJson(res, "POST", "/api/1/upload")).status_code).toBe(413);
    } finally {
      await f.admin.json("PUT", "/api/admin/config", { max_upload_mb: 20 });
    }
  });

  test("a bad or missing key is refused as Chevereto does (400, code 100), and nothing is stored", async () => {
    const before = await imageCount();
    const png = await makePng(20, 20, seed++);
    const bad = await fetch(endpoint(), { method: "POST", body: sharexForm(png, `kura_aaaaaaaaaaaa_${"A".repeat(43)}`) });
    expect(bad.status).toBe(400);
    const body = await specJson(bad, "POST", "/api/1/upload");
    expect(body.status_code).toBe(400);
    expect(body.error.code).toBe(100);
    expect(body.error.message).toMatch(/[\u4e00-\u9fff]/);
    const fd = new FormData();
    fd.append("source", new Blob([new Uint8Array(png)]), "x.png");
    const missing = await fetch(endpoint(), { method: "POST", body: fd });
    expect(missing.status).toBe(400);
    expect((await specJson(missing, "POST", "/api/1/upload")).error.code).toBe(100);
    const header = await fetch(endpoint(), { method: "POST", headers: { "x-api-key": "nonsense" }, body: sharexForm(png, f.token) });
    expect(header.status).toBe(400);
    expect(await imageCount()).toBe(before);
  });

  test("key in the X-API-Key header or the query; format=txt answers the bare link, format=redirect a 302", async () => {
    const jpeg = await makeJpeg(24, 24, seed++);
    const fd = new FormData();
    fd.append("source", new Blob([new Uint8Array(jpeg)]), "a.jpg");
    const txt = await fetch(endpoint("?format=txt"), { method: "POST", headers: { "x-api-key": f.token }, body: fd });
    expect(txt.status).toBe(200);
    expect(txt.headers.get("content-type")).toStartWith("text/plain");
    const link = await txt.text();
    expect(link).toMatch(new RegExp(`^${f.server.base}/i/[0-9A-Za-z]{10}\\.jpg$`));
    expect(sha256(await (await fetch(link)).arrayBuffer())).toBe(sha256(jpeg));

    const redirect = await fetch(endpoint(`?key=${encodeURIComponent(f.token)}&format=redirect`), { method: "POST", body: fd, redirect: "manual" });
    expect(redirect.status).toBe(302);
    expect(redirect.headers.get("location")).toMatch(/\/i\/[0-9A-Za-z]{10}\.jpg$/);

    const txtError = await fetch(endpoint("?format=txt&key=wrong"), { method: "POST", body: fd });
    expect(txtError.status).toBe(400);
    expect(await txtError.text()).toMatch(/[\u4e00-\u9fff]/);
  });

  test("a URL source is imported through the SSRF-safe fetch: allowed origin works, other private addresses are refused", async () => {
    const ok = await fetch(endpoint(), {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded", "x-api-key": f.token },
      body: new URLSearchParams({ source: `http://127.0.0.1:${origin.port}/pic.png` }),
    });
    expect(ok.status).toBe(200);
    const body = await specJson(ok, "POST", "/api/1/upload");
    expect(body.image.original_filename).toBe("pic.png");
    expect(sha256(await (await fetch(body.image.url)).arrayBuffer())).toBe(sha256(originImage));

    const refused = await fetch(endpoint(`?source=${encodeURIComponent("http://10.0.0.1/x.png")}`), { method: "POST", headers: { "x-api-key": f.token } });
    expect(refused.status).toBe(400);
    expect((await specJson(refused, "POST", "/api/1/upload")).error.message).toContain("不是公网地址");
  });

  test("GET with query parameters works like POST (the Chevereto-Free docs' example call): URL or base64 source, json/txt/redirect", async () => {
    const source = `http://127.0.0.1:${origin.port}/from-get.png`;
    const query = (params: Record<string, string>) => `?${new URLSearchParams(params)}`;
    // The docs' call, trailing slash included.
    const res = await fetch(f.server.url(`/api/1/upload/${query({ key: f.token, source, format: "json" })}`));
    expect(res.status).toBe(200);
    const body = await specJson(res, "GET", "/api/1/upload");
    expect(body.image.original_filename).toBe("from-get.png");
    expect(sha256(await (await fetch(body.image.url)).arrayBuffer())).toBe(sha256(originImage));

    const txt = await fetch(endpoint(query({ key: f.token, source, format: "txt" })));
    expect(txt.status).toBe(200);
    expect(await txt.text()).toMatch(new RegExp(`^${f.server.base}/i/[0-9A-Za-z]{10}\\.png$`));
    const redirect = await fetch(endpoint(query({ source, format: "redirect" })), { headers: { "x-api-key": f.token }, redirect: "manual" });
    expect(redirect.status).toBe(302);
    expect(redirect.headers.get("location")).toMatch(/\/i\/[0-9A-Za-z]{10}\.png$/);

    const jpeg = await makeJpeg(12, 12, seed++);
    const b64 = await fetch(endpoint(query({ key: f.token, source: jpeg.toString("base64") })));
    expect(b64.status).toBe(200);
    expect(sha256(await (await fetch((await specJson(b64, "GET", "/api/1/upload")).image.url)).arrayBuffer())).toBe(sha256(jpeg));

    // The same key checks and envelopes as POST.
    const before = await imageCount();
    const bad = await fetch(endpoint(query({ key: "wrong", source })));
    expect(bad.status).toBe(400);
    expect((await specJson(bad, "GET", "/api/1/upload")).error.code).toBe(100);
    const none = await fetch(endpoint(query({ source })));
    expect(none.status).toBe(400);
    expect((await specJson(none, "GET", "/api/1/upload")).error.code).toBe(100);
    const empty = await fetch(endpoint(query({ key: f.token })));
    expect(empty.status).toBe(400);
    const emptyBody = await specJson(empty, "GET", "/api/1/upload");
    expect(emptyBody.error).toMatchObject({ message: expect.stringContaining("缺少 source"), code: 130 });
    expect(await imageCount()).toBe(before);
  });

  describe("expiration (Chevereto V4) is the image's lifetime, as ttl on /api/upload", () => {
    /** A ShareX-style upload with `expiration` in the form, and the admin view of what was stored. */
    async function uploadExpiring(expiration: string) {
      const fd = sharexForm(await makePng(16, 16, seed++), f.token);
      fd.append("expiration", expiration);
      const started = Date.now();
      const res = await fetch(endpoint(), { method: "POST", body: fd });
      return { res, started };
    }
    const stored = async (image: { name: string }) => f.admin.json("GET", `/api/admin/images/${image.name}`);
    const gmt = (text: string) => Date.parse(`${text.replace(" ", "T")}Z`);

    test("an offered choice: the image expires then, and the answer says when", async () => {
      for (const [expiration, seconds] of [
        ["PT5M", 300],
        ["PT1H", 3600],
        ["P3D", 3 * 86400],
        ["P1W", 7 * 86400],
      ] as const) {
        const { res, started } = await uploadExpiring(expiration);
        expect(res.status).toBe(200);
        const { image } = await specJson(res, "POST", "/api/1/upload");
        const detail = await stored(image);
        expect(detail.ttl_seconds).toBe(seconds);
        expect(image.expiration_date_gmt).toBe(detail.expire_at);
        expect(gmt(image.expiration_date_gmt) - started).toBeGreaterThanOrEqual(seconds * 1000 - 1000);
        expect(gmt(image.expiration_date_gmt) - started).toBeLessThan(seconds * 1000 + 10_000);
      }
    });

    test("months and years on the calendar; other durations and seconds clamped to 5 minutes … 1 year; lower case read", async () => {
      const month = await specJson((await uploadExpiring("P1M")).res, "POST", "/api/1/upload");
      expect((await stored(month.image)).ttl_seconds / 86400).toBeOneOf([28, 29, 30, 31]);
      const year = await specJson((await uploadExpiring("p1y")).res, "POST", "/api/1/upload");
      expect((await stored(year.image)).ttl_seconds / 86400).toBeOneOf([365, 366]);
      for (const [expiration, seconds] of [
        ["PT2H30M", 9000],
        ["7200", 7200],
        ["60", 300],
        ["PT1S", 300],
        ["P2Y", 31_536_000],
        ["P99999999999Y", 31_536_000],
      ] as const) {
        const { image } = await specJson((await uploadExpiring(expiration)).res, "POST", "/api/1/upload");
        expect([expiration, (await stored(image)).ttl_seconds]).toEqual([expiration, seconds]);
      }
    });

    test("0 or no expiration keeps the image (the default lifetime); an unreadable one is a 400 and nothing is stored", async () => {
      const kept = await specJson((await uploadExpiring("0")).res, "POST", "/api/1/upload");
      expect(kept.image.expiration_date_gmt).toBeNull();
      expect((await stored(kept.image)).expire_at).toBeNull();
      const before = await imageCount();
      for (const bad of ["5 minutes", "P", "PT", "P1DT", "-300", "P1.5D"]) {
        const { res } = await uploadExpiring(bad);
        expect([bad, res.status]).toEqual([bad, 400]);
        expect((await specJson(res, "POST", "/api/1/upload")).error.message).toContain("expiration");
      }
      expect(await imageCount()).toBe(before);
    });

    test("in a urlencoded body and in a GET query too", async () => {
      const jpeg = await makeJpeg(14, 14, seed++);
      const urlencoded = await fetch(endpoint(), {
        method: "POST",
        headers: { "content-type": "application/x-www-form-urlencoded" },
        body: new URLSearchParams({ key: f.token, expiration: "PT15M", source: jpeg.toString("base64") }),
      });
      expect((await stored((await specJson(urlencoded, "POST", "/api/1/upload")).image)).ttl_seconds).toBe(900);
      const source = `http://127.0.0.1:${origin.port}/expiring.png`;
      const get = await fetch(endpoint(`?${new URLSearchParams({ key: f.token, source, expiration: "PT30M" })}`));
      expect((await stored((await specJson(get, "GET", "/api/1/upload")).image)).ttl_seconds).toBe(1800);
    });
  });

  test("invalid base64 is Chevereto's 400 (code 120), a non-image keeps the pipeline's 415", async () => {
    const garbage = await fetch(endpoint(), {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded", "x-api-key": f.token },
      body: new URLSearchParams({ source: "not base64 at all!" }),
    });
    expect(garbage.status).toBe(400);
    expect(await specJson(garbage, "POST", "/api/1/upload")).toMatchObject({ status_code: 400, error: { code: 120 } });
    const text = await fetch(endpoint(), { method: "POST", body: sharexForm(new TextEncoder().encode("hello"), f.token, "a.txt") });
    expect(text.status).toBe(415);
    expect((await specJson(text, "POST", "/api/1/upload")).status_code).toBe(415);
  });

  test("reading a form whose key is inside it holds one of the max_concurrent_uploads slots", async () => {
    await f.admin.json("PUT", "/api/admin/config", { max_concurrent_uploads: 1 });
    let finish = () => {};
    try {
      const png = await makePng(30, 30, seed++);
      const boundary = `----sharex${seed}`;
      const head = `--${boundary}\r\nContent-Disposition: form-data; name="key"\r\n\r\n${f.token}\r\n--${boundary}\r\nContent-Disposition: form-data; name="source"; filename="slow.png"\r\nContent-Type: image/png\r\n\r\n`;
      const resumed = new Promise<void>((resolve) => (finish = resolve));
      const body = new ReadableStream<Uint8Array>({
        async start(controller) {
          controller.enqueue(new TextEncoder().encode(head));
          controller.enqueue(png.subarray(0, 10));
          await resumed;
          controller.enqueue(png.subarray(10));
          controller.enqueue(new TextEncoder().encode(`\r\n--${boundary}--\r\n`));
          controller.close();
        },
      });
      const slow = fetch(endpoint(), {
        method: "POST",
        headers: { "content-type": `multipart/form-data; boundary=${boundary}` },
        body,
        duplex: "half",
      } as RequestInit);
      // While that form is still arriving, the one slot is taken: another upload is refused.
      let other: Response | undefined;
      for (let i = 0; i < 50 && other?.status !== 429; i++) {
        await Bun.sleep(20);
        other = await fetch(f.server.url("/api/upload"), {
          method: "POST",
          headers: { authorization: `Bearer ${f.token}` },
          body: form(await makeJpeg(16, 16, seed++)),
        });
      }
      expect(other!.status).toBe(429);
      finish();
      const done = await slow;
      expect(done.status).toBe(200);
      expect((await specJson(done, "POST", "/api/1/upload")).image.original_filename).toBe("slow.png");
      // The slot is free again.
      const after = await fetch(f.server.url("/api/upload"), {
        method: "POST",
        headers: { authorization: `Bearer ${f.token}` },
        body: form(await makeJpeg(16, 16, seed++)),
      });
      expect(after.status).toBe(200);
    } finally {
      finish();
      await f.admin.json("PUT", "/api/admin/config", { max_concurrent_uploads: 16 });
    }
  });
});
