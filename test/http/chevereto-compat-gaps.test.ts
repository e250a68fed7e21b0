/**
 * The Chevereto API v1 surface where it follows Chevereto V4 in small ways: `image` as
 * `source` with ImgBB's answer shape (app/legacy/routes/api.php), and `date` in the server's
 * local time zone beside `date_gmt` in UTC (the server runs with TZ=Asia/Shanghai here).
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { randomBytes } from "node:crypto";
import sharp from "sharp";
import { makePng } from "../helpers/images";
import { expectNoUploadLeftovers } from "../helpers/leftovers";
import { pngOrigin, sha256, specJson, startClientFixture, type ClientFixture } from "../clients/fixture";

/** Noise compresses badly: a PNG whose base64 is well over the 8 KiB a text field keeps. */
const noisyPng = () =>
  sharp(randomBytes(64 * 64 * 3), { raw: { width: 64, height: 64, channels: 3 } })
    .png()
    .toBuffer();

/** UTC `YYYY-MM-DD HH:MM:SS` moved by `hours`, in the same format. */
function shifted(utc: string, hours: number): string {
  return new Date(Date.parse(`${utc.replace(" ", "T")}Z`) + hours * 3_600_000).toISOString().slice(0, 19).replace("T", " ");
}

describe("Chevereto API v1: the small compatibility points", () => {
  let f: ClientFixture;
  let origin: ReturnType<typeof Bun.serve>;
  let originImage: Buffer;
  let seed = 700;
  beforeAll(async () => {
    f = await startClientFixture({ TZ: "Asia/Shanghai", KURA_IMPORT_ALLOW: "127.0.0.1/32" });
    originImage = await makePng(30, 20, 77);
    origin = pngOrigin(originImage);
  });
  afterAll(async () => {
    origin.stop(true);
    await f.dispose();
  });

  const endpoint = (query = "") => f.server.url(`/api/1/upload${query}`);
  const urlencoded = (params: [string, string][]) =>
    fetch(endpoint(), {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded", "x-api-key": f.token },
      body: new URLSearchParams(params),
    });
  const served = async (url: string) => sha256(await (await fetch(url)).arrayBuffer());

  /** V4's answer when `image` was sent: status beside status_code, the image under data with its id. */
  function expectImgbbShape(body: any) {
    expect(body).toMatchObject({ status_code: 200, status: 200, success: { message: "file uploaded", code: 200 }, status_txt: "OK" });
    expect(Object.keys(body).sort()).toEqual(["data", "status", "status_code", "status_txt", "success"]);
    expect(body.data.id).toBe(body.data.id_encoded);
    expect(body.data.url).toMatch(/\/i\/[0-9A-Za-z]{10}\.(png|jpg)$/);
    // Kura has no unauthenticated delete links.
    expect(body.data.delete_url).toBeUndefined();
  }

  test("image instead of source: base64 in a urlencoded body (short and long), ImgBB's answer shape", async () => {
    const small = await makePng(8, 8, seed++);
    const res = await urlencoded([["image", small.toString("base64")]]);
    expect(res.status).toBe(200);
    const body = await specJson(res, "POST", "/api/1/upload");
    expectImgbbShape(body);
    expect(await served(body.data.url)).toBe(sha256(small));
    expect(body.data).toMatchObject({ width: 8, height: 8, size: small.length, extension: "png" });
    // Longer than the 8 KiB kept as text: decoded to a temp file as it streams, like a long source.
    const large = await noisyPng();
    expect(large.length * (4 / 3)).toBeGreaterThan(8 * 1024);
    const long = await specJson(await urlencoded([["image", large.toString("base64")]]), "POST", "/api/1/upload");
    expectImgbbShape(long);
    expect(await served(long.data.url)).toBe(sha256(large));
  });

  test("image as a URL: in the query of a GET and as a multipart text field; format=txt is still the bare link", async () => {
    const url = `http://127.0.0.1:${origin.port}/imgbb.png`;
    const get = await fetch(endpoint(`?${new URLSearchParams({ key: f.token, image: url })}`));
    expect(get.status).toBe(200);
    const body = await specJson(get, "GET", "/api/1/upload");
    expectImgbbShape(body);
    expect(body.data.original_filename).toBe("imgbb.png");
    expect(await served(body.data.url)).toBe(sha256(originImage));

    const fd = new FormData();
    fd.append("key", f.token);
    fd.append("image", url);
    const multipart = await fetch(endpoint(), { method: "POST", body: fd });
    expect(multipart.status).toBe(200);
    expectImgbbShape(await specJson(multipart, "POST", "/api/1/upload"));

    const txt = await fetch(endpoint(`?${new URLSearchParams({ key: f.token, image: url, format: "txt" })}`));
    expect(await txt.text()).toMatch(new RegExp(`^${f.server.base}/i/[0-9A-Za-z]{10}\\.png$`));
    // Base64 in a multipart text field may be as long as `source` there (past the 1 KiB of other fields).
    const large = await noisyPng();
    const long = new FormData();
    long.append("key", f.token);
    long.append("image", large.toString("base64"));
    const accepted = await fetch(endpoint(), { method: "POST", body: long });
    expect(accepted.status).toBe(200);
    const longBody = await specJson(accepted, "POST", "/api/1/upload");
    expectImgbbShape(longBody);
    expect(await served(longBody.data.url)).toBe(sha256(large));
    // Both long in one form: source wins, as everywhere.
    const small = await makePng(12, 12, seed++);
    const both = new FormData();
    both.append("key", f.token);
    both.append("image", large.toString("base64"));
    both.append("source", small.toString("base64"));
    const bothBody = await specJson(await fetch(endpoint(), { method: "POST", body: both }), "POST", "/api/1/upload");
    expect(await served(bothBody.data.url)).toBe(sha256(small));
    // Any other text field stays at 1 KiB.
    const other = new FormData();
    other.append("key", f.token);
    other.append("source", small.toString("base64"));
    other.append("format", "x".repeat(2048));
    const refused = await fetch(endpoint(), { method: "POST", body: other });
    expect(refused.status).toBe(400);
    expect((await specJson(refused, "POST", "/api/1/upload")).error.message).toBe("表单字段 format 超过 1 KiB");
  });

  test("source wins over image in any order (Chevereto's source ?? image), and the answer is still ImgBB's", async () => {
    const a = await makePng(10, 10, seed++);
    const b = await makePng(11, 11, seed++);
    const large = await noisyPng();
    // image first (long, decoded to a file) then source; source first then image.
    for (const params of [
      [
        ["image", large.toString("base64")],
        ["source", a.toString("base64")],
      ],
      [
        ["source", a.toString("base64")],
        ["image", b.toString("base64")],
      ],
    ] as [string, string][][]) {
      const body = await specJson(await urlencoded(params), "POST", "/api/1/upload");
      expectImgbbShape(body);
      expect(await served(body.data.url)).toBe(sha256(a));
    }
    // A source file part beats an image field; a source in the query beats an image in the form.
    const fd = new FormData();
    fd.append("source", new Blob([new Uint8Array(a)]), "a.png");
    fd.append("image", `http://127.0.0.1:${origin.port}/no.png`);
    const file = await specJson(await fetch(endpoint(), { method: "POST", headers: { "x-api-key": f.token }, body: fd }), "POST", "/api/1/upload");
    expect(await served(file.data.url)).toBe(sha256(a));
    const queried = await fetch(endpoint(`?source=${encodeURIComponent(a.toString("base64"))}`), {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded", "x-api-key": f.token },
      body: new URLSearchParams({ image: b.toString("base64") }),
    });
    expect(await served((await specJson(queried, "POST", "/api/1/upload")).data.url)).toBe(sha256(a));
    // The same with a long image, already decoded to a temp file when the query's source wins: removed.
    const queriedLong = await fetch(endpoint(`?source=${encodeURIComponent(a.toString("base64"))}`), {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded", "x-api-key": f.token },
      body: new URLSearchParams({ image: large.toString("base64") }),
    });
    expect(await served((await specJson(queriedLong, "POST", "/api/1/upload")).data.url)).toBe(sha256(a));
    await expectNoUploadLeftovers(f.server);
    // Without image, Chevereto's own shape.
    const plain = await specJson(await urlencoded([["source", b.toString("base64")]]), "POST", "/api/1/upload");
    expect(plain.image.url).toBeString();
    expect(plain.data).toBeUndefined();
  });

  test("date is the server's local time (TZ=Asia/Shanghai: UTC+8), date_gmt UTC", async () => {
    const png = await makePng(9, 9, seed++);
    const body = await specJson(await urlencoded([["source", png.toString("base64")]]), "POST", "/api/1/upload");
    const stored = await f.admin.json("GET", `/api/admin/images/${body.image.name}`);
    expect(body.image.date_gmt).toBe(stored.created_at);
    expect(body.image.date).toBe(shifted(stored.created_at, 8));
  });
});
