/**
 * Delivery audit M1 and L1. If-Range (RFC 9110 §13.1.5): a Range applies only while If-Range names the
 * current representation. An `/o/` alias can be re-pointed by a new upload of its key between two
 * requests of a resumed download; the second request then got the new image's bytes joined onto
 * the old file (206) or a 416, where the RFC asks for the whole new image (200). If-Modified-Since
 * (delivery audit L3) was never answered with a 304 although Last-Modified is sent.
 */
import { beforeAll, describe, expect, test } from "bun:test";
import sharp from "sharp";
import { useAdmin } from "../helpers/fixture";
import { form, makeJpeg, sha256 } from "../helpers/images";

describe("originals: If-Range, If-Modified-Since, and one URL per image", () => {
  const { server, admin } = useAdmin();
  let token = "";
  const upload = async (bytes: Uint8Array, objectKey = "resume/photo.jpg") => {
    const res = await fetch(server.url("/api/upload"), {
      method: "POST",
      headers: { authorization: `Bearer ${token}` },
      body: form(bytes, "photo.jpg", { object_key: objectKey }),
    });
    expect(res.status).toBe(200);
  };
  const get = (headers: Record<string, string>) => fetch(server.url("/o/default/resume/photo.jpg"), { headers });
  /** `/o/` dates an image only once the second it was made is over (the test below says why). */
  const pastItsSecond = () => Bun.sleep(1020 - (Date.now() % 1000));
  beforeAll(async () => {
    token = (await admin.json("POST", "/api/admin/tokens", { name: "if-range" }, 201)).token;
  });

  test("a download resumed after the alias moved gets the whole new image; a current validator keeps the range", async () => {
    const first = await makeJpeg(400, 300, 61);
    await upload(first);
    await pastItsSecond();
    const start = await get({ range: "bytes=0-99" });
    expect(start.status).toBe(206);
    const oldTag = start.headers.get("etag")!;
    const oldDate = start.headers.get("last-modified")!;
    await start.arrayBuffer();

    // Still the same image: the range applies, by tag and by date.
    expect((await get({ range: "bytes=100-", "if-range": oldTag })).status).toBe(206);
    expect((await get({ range: "bytes=100-", "if-range": oldDate })).status).toBe(206);

    await Bun.sleep(1100); // a new Last-Modified second for the new upload
    const second = await makeJpeg(64, 48, 62);
    await upload(second);
    for (const validator of [oldTag, oldDate, `W/${oldTag}`]) {
      const resumed = await get({ range: "bytes=100-", "if-range": validator });
      expect({ validator, status: resumed.status }).toEqual({ validator, status: 200 });
      expect(sha256(new Uint8Array(await resumed.arrayBuffer()))).toBe(sha256(second));
    }
    // A weak tag never matches, even the current one (strong comparison).
    const current = (await get({})).headers.get("etag")!;
    expect((await get({ range: "bytes=0-9", "if-range": `W/${current}` })).status).toBe(200);
    expect((await get({ range: "bytes=0-9", "if-range": current })).status).toBe(206);
  });

  test("/i/<id>/ is no second URL of the image (a CDN purge would miss it): 404 like /i/<id>/x", async () => {
    const up = await fetch(server.url("/api/upload"), {
      method: "POST",
      headers: { authorization: `Bearer ${token}` },
      body: form(await makeJpeg(40, 30, 63), "a.jpg"),
    });
    const { id } = (await up.json()) as { id: string };
    expect((await fetch(server.url(`/i/${id}`))).status).toBe(200);
    for (const path of [`/i/${id}/`, `/i/${id}/?w=320`, `/i/${id}/x`])
      expect({ path, status: (await fetch(server.url(path))).status }).toEqual({ path, status: 404 });
  });

  test("If-Modified-Since: 304 while the image is unchanged since, 200 after the alias moved; If-None-Match decides when both come", async () => {
    await upload(await makeJpeg(50, 40, 64));
    await pastItsSecond();
    const first = await get({});
    const lastModified = first.headers.get("last-modified")!;
    const tag = first.headers.get("etag")!;
    await first.arrayBuffer();
    for (const since of [lastModified, new Date(Date.parse(lastModified) + 60_000).toUTCString()]) {
      const res = await get({ "if-modified-since": since });
      expect({ since, status: res.status }).toEqual({ since, status: 304 });
      expect(res.headers.get("etag")).toBe(tag);
      expect(res.headers.get("cache-control")).toBe("public, no-cache");
    }
    // Earlier than the image, or unreadable: the whole image.
    expect((await get({ "if-modified-since": new Date(Date.parse(lastModified) - 1000).toUTCString() })).status).toBe(200);
    expect((await get({ "if-modified-since": "not a date" })).status).toBe(200);
    // Not HTTP-dates (RFC 9110 13.1.3: ignored), though Date.parse reads them as dates after the image.
    for (const since of ["2099", "2099-01-01", "2099-01-01T00:00:00Z"]) expect((await get({ "if-modified-since": since })).status).toBe(200);
    // If-None-Match takes precedence (RFC 9110 13.2.2): a tag that does not match is a 200 whatever the date.
    expect((await get({ "if-none-match": '"other"', "if-modified-since": lastModified })).status).toBe(200);

    await Bun.sleep(1100);
    await upload(await makeJpeg(50, 40, 65));
    expect((await get({ "if-modified-since": lastModified })).status).toBe(200);
  });

  test("/o/ gives no Last-Modified in the second its image was made: an alias moved within that second would share the date", async () => {
    const put = (bytes: Uint8Array) => upload(bytes, "same/second.jpg");
    const at = (path: string, headers: Record<string, string> = {}) => fetch(server.url(path), { headers });
    // Start early in a second, so both uploads and the reads below fall in it.
    while (Date.now() % 1000 > 200) await Bun.sleep(5);
    const second = Math.floor(Date.now() / 1000) * 1000;
    await put(await makeJpeg(40, 30, 68));
    const first = await at("/o/default/same/second.jpg");
    await first.arrayBuffer();
    await put(await makeJpeg(40, 30, 69));
    const moved = await at("/o/default/same/second.jpg", { "if-modified-since": new Date(second).toUTCString() });
    await moved.arrayBuffer();
    if (Date.now() - second >= 1000) return; // a machine too slow for this second: nothing to conclude
    expect(first.headers.get("last-modified")).toBeNull();
    // The date of that second validates nothing yet: the alias's current image comes whole.
    expect(moved.status).toBe(200);
    expect(moved.headers.get("etag")).not.toBe(first.headers.get("etag"));
    // Once the second is over the date is given, and validates the image the alias ended on.
    await Bun.sleep(second + 1050 - Date.now());
    const later = await at("/o/default/same/second.jpg");
    await later.arrayBuffer();
    expect(later.headers.get("last-modified")).toBe(new Date(second).toUTCString());
    expect((await at("/o/default/same/second.jpg", { "if-modified-since": later.headers.get("last-modified")! })).status).toBe(304);
  });

  test("If-Modified-Since on /i/ from memory, and twice in a row: the warm-answer memo never answers it with 200", async () => {
    const up = await fetch(server.url("/api/upload"), {
      method: "POST",
      headers: { authorization: `Bearer ${token}` },
      body: form(await makeJpeg(30, 30, 66), "w.jpg"),
    });
    const { id } = (await up.json()) as { id: string };
    const plain = await fetch(server.url(`/i/${id}`));
    const lastModified = plain.headers.get("last-modified")!;
    await plain.arrayBuffer();
    await (await fetch(server.url(`/i/${id}`))).arrayBuffer(); // now remembered
    for (let i = 0; i < 2; i++) expect((await fetch(server.url(`/i/${id}`), { headers: { "if-modified-since": lastModified } })).status).toBe(304);
  });
});

describe("bodiless /i/ answers", () => {
  const { server, admin } = useAdmin();

  test("carry Date (RFC 9110 6.6.1) like every other answer: HEAD of an original, a variant and a missing image, and a 304", async () => {
    await admin.json("PUT", "/api/admin/config", { process_widths: [16] });
    const { id } = await admin.json("POST", "/api/admin/upload", form(await makeJpeg(40, 30, 67), "dated.jpg"));
    const etag = (await (await fetch(server.url(`/i/${id}`))).arrayBuffer(), (await fetch(server.url(`/i/${id}`), { method: "HEAD" })).headers.get("etag")!);
    const answers = {
      original: await fetch(server.url(`/i/${id}`), { method: "HEAD" }),
      variant: await fetch(server.url(`/i/${id}?w=16`), { method: "HEAD" }),
      missing: await fetch(server.url("/i/XXXXXXXXXX"), { method: "HEAD" }),
      notModified: await fetch(server.url(`/i/${id}`), { headers: { "if-none-match": etag } }),
    };
    const shape = Object.fromEntries(
      Object.entries(answers).map(([k, res]) => [k, [res.status, Math.abs(Date.parse(res.headers.get("date") ?? "") - Date.now()) < 60_000]]),
    );
    expect(shape).toEqual({ original: [200, true], variant: [200, true], missing: [404, true], notModified: [304, true] });
  });
});

describe("a render that fails: the original in its place", () => {
  const { server, admin } = useAdmin();

  test("is sent uncached and unconditional, and never lends those headers to the image's own original answer", async () => {
    // AVIF (HEIF) cannot hold an image wider than 16384 pixels: this render fails at once, every time.
    const png = await sharp({ create: { width: 17000, height: 8, channels: 3, background: "#369" } })
      .png()
      .toBuffer();
    const { id } = await admin.json("POST", "/api/admin/upload", form(png, "wide.png"));
    const image = await admin.json("GET", `/api/admin/images/${id}`);
    const fetched = async (path: string, headers: Record<string, string> = {}) => {
      const res = await fetch(server.url(path), { headers });
      const body = Buffer.from(await res.arrayBuffer());
      return [res.status, res.headers.get("content-type"), res.headers.get("cache-control"), res.headers.get("etag"), sha256(body)];
    };
    const fallback = [200, "image/png", "no-store", null, image.sha256];
    const original = [200, "image/png", "public, max-age=31536000, immutable", `"${image.sha256}"`, image.sha256];
    // The failed render, then the failure remembered (no new render), each side twice, within one lookup's lifetime.
    for (let i = 0; i < 2; i++) {
      expect(await fetched(`/i/${id}?format=avif`)).toEqual(fallback);
      expect(await fetched(`/i/${id}`)).toEqual(original);
    }
    // The original's tag does not validate the stand-in: a cache holds nothing of it to refresh.
    expect(await fetched(`/i/${id}?format=avif`, { "if-none-match": `"${image.sha256}"` })).toEqual(fallback);
    expect((await fetched(`/i/${id}`, { "if-none-match": `"${image.sha256}"` }))[0]).toBe(304);
  });
});
