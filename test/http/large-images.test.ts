/**
 * Images up to `max_pixels_mp` are resized like any other (settings audit M1): the upload's steps
 * lifted sharp's own limit of 268,402,689 pixels, the render did not, so with max_pixels_mp above
 * 268 such an image uploaded fine but every `?w=` and every negotiated WebP answered the whole
 * original with `Cache-Control: no-store` (uncacheable by browsers and CDNs).
 */
import { expect, test } from "bun:test";
import sharp from "sharp";
import { useAdmin } from "../helpers/fixture";
import { bilevelPng, form } from "../helpers/images";

const { server, admin } = useAdmin();

test("a 269-megapixel image, allowed by max_pixels_mp, is resized and converted, not served whole", async () => {
  await admin.json("PUT", "/api/admin/config", { max_pixels_mp: 300, process_widths: [320] });
  const png = bilevelPng(16_500, 16_300);
  const { id } = await admin.json("POST", "/api/admin/upload", form(png, "scan.png"));

  for (const [query, type] of [
    ["?w=320", "image/png"],
    ["?w=320&format=webp", "image/webp"],
  ] as const) {
    const res = await fetch(server.url(`/i/${id}${query}`));
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toBe(type);
    expect(res.headers.get("cache-control")).not.toContain("no-store");
    const meta = await sharp(Buffer.from(await res.arrayBuffer())).metadata();
    expect(meta.width).toBe(320);
  }
  expect(server.logs).not.toContain("图片处理失败");
}, 60_000);
