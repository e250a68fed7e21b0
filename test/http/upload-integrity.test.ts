/**
 * Upload audit (thirty-first stop): what an upload stores must be whole and its name harmless.
 * A JPEG cut off after its header was stored under `strip` (the container walk copied it as it
 * was), and under `passthrough` a cut PNG or AVIF too; every render of them then failed. A file
 * name with NUL, newlines or U+202E was stored as sent; a NUL in a search was a 500. A batch
 * delete naming an id twice reported the image it had just deleted as not found, `{}` as a PATCH
 * was told the body was no JSON object, a retried upload got the id of an image that had
 * expired since, and a second file under the upload's field was dropped without a word.
 */
import { describe, expect, test } from "bun:test";
import { randomBytes } from "node:crypto";
import { readdirSync } from "node:fs";
import { join } from "node:path";
import sharp from "sharp";
import { expectError } from "../helpers/client";
import { useAdmin } from "../helpers/fixture";
import { form, makeJpeg, makePng } from "../helpers/images";

/** An image with detail everywhere (noise), so half of it cuts through its pixel data. */
async function noisy(format: "jpeg" | "png" | "avif", size = 160): Promise<Buffer> {
  const raw = Buffer.alloc(size * size * 3);
  for (let i = 0; i < raw.length; i++) raw[i] = (i * 2654435761) >>> 24;
  return sharp(raw, { raw: { width: size, height: size, channels: 3 } })
    .toFormat(format)
    .toBuffer();
}

describe("uploads", () => {
  const { admin } = useAdmin();
  const upload = (bytes: Uint8Array, name: string, fields: Record<string, string> = {}, headers: Record<string, string> = {}) =>
    admin.request("POST", "/api/admin/upload", form(bytes, name, fields), headers);

  test("an image cut off past its header is refused with 415 under either policy; the whole one is stored", async () => {
    for (const format of ["jpeg", "png", "avif"] as const) {
      const whole = await noisy(format);
      for (const exif_policy of ["strip", "passthrough"]) {
        const cut = whole.subarray(0, Math.floor(whole.length * 0.6));
        const refused = await upload(cut, `cut.${format}`, { exif_policy });
        expect({ format, exif_policy, status: refused.status }).toEqual({ format, exif_policy, status: 415 });
        expect(await refused.json()).toEqual({ error: expect.stringContaining("不完整或已损坏") });
        const stored = await upload(whole, `whole.${format}`, { exif_policy });
        expect({ format, exif_policy, status: stored.status }).toEqual({ format, exif_policy, status: 200 });
      }
    }
  });

  test("passthrough uploads streamed to disk (over 4 MiB) are checked too: cut off, 415; whole, stored", async () => {
    // Random pixels do not compress: about 7.7 MB whole, 4.6 MB cut.
    const whole = await sharp(randomBytes(1600 * 1600 * 3), { raw: { width: 1600, height: 1600, channels: 3 } })
      .png()
      .toBuffer();
    const cut = whole.subarray(0, Math.floor(whole.length * 0.6));
    expect(cut.length).toBeGreaterThan(4 * 1024 * 1024);
    const refused = await upload(cut, "big-cut.png", { exif_policy: "passthrough" });
    expect(refused.status).toBe(415);
    await refused.arrayBuffer();
    const stored = await upload(whole, "big.png", { exif_policy: "passthrough" });
    expect(stored.status).toBe(200);
    await stored.arrayBuffer();
  });

  test("a file name keeps no control or bidi-override characters; a NUL in a search is no 500", async () => {
    // As a client can send it: RFC 5987 `filename*`, percent-encoded (NUL, newline, SOH, U+202E).
    const boundary = "----kura-name-test";
    const png = await makePng(20, 20, 3);
    const body = Buffer.concat([
      Buffer.from(
        `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename*=UTF-8''%0A%01evil%00%E2%80%AEgnp.exe.png\r\nContent-Type: image/png\r\n\r\n`,
      ),
      png,
      Buffer.from(`\r\n--${boundary}--\r\n`),
    ]);
    const sent = await fetch(admin.server.url("/api/admin/upload"), {
      method: "POST",
      headers: { cookie: admin.cookie, "x-csrf-token": admin.csrf, "content-type": `multipart/form-data; boundary=${boundary}` },
      body,
    });
    expect(sent.status).toBe(200);
    const { id } = await sent.json();
    expect((await admin.json("GET", `/api/admin/images/${id}`)).file_name).toBe("evilgnp.exe.png");
    for (const search of ["png%00", "p%00", "%00", "%0A"]) {
      const res = await admin.request("GET", `/api/admin/images?search=${search}`);
      expect({ search, status: res.status }).toEqual({ search, status: 200 });
      await res.arrayBuffer();
    }
    const found = await admin.json("GET", "/api/admin/images?search=evil%00gnp");
    expect(found.items.map((i: { id: string }) => i.id)).toEqual([id]);
  });

  test("two files under the upload's field are refused, not one stored and the other dropped; nothing is left behind", async () => {
    const two = (png: Uint8Array) => {
      const body = form(png, "one.png");
      body.append("file", new Blob([new Uint8Array(png)], { type: "image/png" }), "two.png");
      return body;
    };
    const before = (await admin.json("GET", "/api/admin/images")).total;
    // A small body is read into memory, a large one streamed to disk: both paths refuse.
    // Random pixels do not compress: two 3 MB files make a body over the 4 MiB kept in memory.
    const large = await sharp(randomBytes(1000 * 1000 * 3), { raw: { width: 1000, height: 1000, channels: 3 } })
      .png()
      .toBuffer();
    for (const png of [await makePng(20, 20, 7), large]) {
      const res = await admin.request("POST", "/api/admin/upload", two(png));
      expect(await expectError(res, 400)).toBe("一次只能上传一个文件：表单中的 file 字段出现了多次");
    }
    expect((await admin.json("GET", "/api/admin/images")).total).toBe(before);
    expect(readdirSync(join(admin.server.dataDir, "tmp")).filter((f) => !f.startsWith("."))).toEqual([]);
  });

  test("a batch delete naming an image twice deletes it once and reports no failure for it", async () => {
    const { id } = await (await upload(await makeJpeg(20, 20, 4), "twice.jpg")).json();
    const res = await admin.json("POST", "/api/admin/images/batch-delete", { ids: [id, "nope", id] });
    expect(res).toEqual({ deleted: 1, failed: [{ id: "nope", error: expect.any(String) }] });
  });

  test("PATCH with no field says so", async () => {
    const { id } = await (await upload(await makeJpeg(20, 20, 5), "patch.jpg")).json();
    expect(await expectError(await admin.request("PATCH", `/api/admin/images/${id}`, {}), 400)).toBe("至少需要一个字段");
  });

  test("a retry whose earlier image has expired since uploads anew instead of naming an image that answers 404", async () => {
    const headers = { "idempotency-key": "expired-retry-1" };
    const first = await (await upload(await makeJpeg(20, 20, 6), "ttl.jpg", { ttl: "1" }, headers)).json();
    await Bun.sleep(2200); // expire_at is the next whole second after created_at + ttl
    expect((await fetch(admin.server.url(`/i/${first.id}`))).status).toBe(404);
    const again = await upload(await makeJpeg(20, 20, 6), "ttl.jpg", { ttl: "60" }, headers);
    expect(again.status).toBe(200);
    const { id } = await again.json();
    expect(id).not.toBe(first.id);
    expect((await fetch(admin.server.url(`/i/${id}`))).status).toBe(200);
  });
});
