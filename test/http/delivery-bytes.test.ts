/**
 * What delivery sends, byte for byte and header for header:
 * - range answers carry exactly the requested slice of the stored original, from storage (nothing in
 *   memory yet) and from the in-memory copy (storage object removed, so memory is the only source),
 *   under `/i/` and `/o/`;
 * - every 304 carries the same Cache-Control, ETag, Vary and Last-Modified as the 200 it stands for,
 *   for originals and variants under `/i/` and `/o/`.
 */
import { beforeAll, describe, expect, test } from "bun:test";
import { rmSync } from "node:fs";
import { join } from "node:path";
import { adminSession } from "../helpers/client";
import sharp from "sharp";
import { useServer } from "../helpers/fixture";
import { form, makeAnimated, makeJpeg } from "../helpers/images";
import { queryDb } from "./channels.helpers";

describe("delivered bytes and revalidation headers", () => {
  let bytes: Buffer;
  let jpeg: { id: string; key: string };
  let gif: { id: string };
  /** A second JPEG for the header checks: the range test removes the first one's stored object. */
  let hdr: { id: string; key: string };
  let userId: string;
  const get = (path: string, headers: Record<string, string> = {}) => fetch(server.url(path), { headers, redirect: "manual" });

  const { server } = useServer();
  beforeAll(async () => {
    const admin = await adminSession(server);
    await admin.json("PUT", "/api/admin/config", { process_widths: [16, 320], process_formats: ["webp", "jpeg", "png", "gif"] });
    const token = (await admin.json("POST", "/api/admin/tokens", { name: "bytes" }, 201)).token;
    // Seeded noise: a few kB that do not compress, so every slice below is distinct.
    const noise = new Uint8Array(96 * 64 * 3).map((_, i) => (i * 2654435761) >>> 13);
    bytes = await sharp(noise, { raw: { width: 96, height: 64, channels: 3 } })
      .jpeg({ quality: 95 })
      .toBuffer();
    expect(bytes.length).toBeGreaterThan(2000);
    const up = async (body: Uint8Array, name: string, objectKey: string) => {
      const res = await fetch(server.url("/api/upload"), {
        method: "POST",
        headers: { authorization: `Bearer ${token}` },
        body: form(body, name, { object_key: objectKey, exif_policy: "passthrough" }),
      });
      expect(res.status).toBe(200);
      return (await res.json()).id as string;
    };
    jpeg = { id: await up(bytes, "r.jpg", "range/r.jpg"), key: "range/r.jpg" };
    gif = { id: await up(await makeAnimated("gif", 24, 24, 2), "a.gif", "anim/a.gif") };
    hdr = { id: await up(await makeJpeg(40, 30, 45), "h.jpg", "hdr/h.jpg"), key: "hdr/h.jpg" };
    userId = (await admin.json("GET", "/api/admin/me")).user.id;
    // `/o/` dates an image only once the second it was made is over (delivery-edges.test.ts).
    await Bun.sleep(1020 - (Date.now() % 1000));
  });

  const paths = () => [`/i/${jpeg.id}`, `/o/${userId}/${jpeg.key}`];
  const ranges = (size: number): [string, number, number][] => [
    ["bytes=0-0", 0, 0],
    ["bytes=0-99", 0, 99],
    ["bytes=1-100", 1, 100],
    ["bytes=517-1500", 517, 1500],
    [`bytes=${size - 10}-`, size - 10, size - 1],
    ["bytes=-37", size - 37, size - 1],
    [`bytes=100-${size + 500}`, 100, size - 1],
  ];

  async function expectSlices(source: string) {
    for (const path of paths()) {
      for (const [header, start, end] of ranges(bytes.length)) {
        const res = await get(path, { range: header });
        const body = Buffer.from(await res.arrayBuffer());
        const where = `${source} ${path} ${header}`;
        expect(`${where} ${res.status}`).toBe(`${where} 206`);
        expect(res.headers.get("content-range")).toBe(`bytes ${start}-${end}/${bytes.length}`);
        expect(body.equals(bytes.subarray(start, end + 1))).toBe(true);
      }
    }
  }

  test("range slices from storage, then from memory with the stored object gone", async () => {
    // Nothing has read the original whole yet, so nothing is in memory: these come from the channel.
    await expectSlices("storage");
    const full = await get(`/i/${jpeg.id}`);
    expect(Buffer.from(await full.arrayBuffer()).equals(bytes)).toBe(true);
    // The whole read kept the original in memory; with the object removed, memory is the only source left.
    const [{ storage_key }] = queryDb<{ storage_key: string }>(
      server,
      "SELECT b.storage_key FROM images i JOIN blobs b ON b.id = i.blob_id WHERE i.id = ?",
      jpeg.id,
    );
    rmSync(join(server.dataDir, "storage", storage_key));
    await expectSlices("memory");
  });

  const cases = () => [
    { what: "/i/ original (negotiable JPEG)", path: `/i/${hdr.id}`, accept: "image/png", vary: "Accept", lastModified: true },
    { what: "/i/ original (GIF, not negotiable)", path: `/i/${gif.id}`, accept: "image/webp", vary: null, lastModified: true },
    { what: "/i/ negotiated WebP variant", path: `/i/${hdr.id}`, accept: "image/webp", vary: "Accept", lastModified: false },
    { what: "/i/ resized variant", path: `/i/${hdr.id}?w=16`, accept: "image/png", vary: "Accept", lastModified: false },
    { what: "/i/ explicit-format variant", path: `/i/${hdr.id}?format=png`, accept: "image/webp", vary: null, lastModified: false },
    { what: "/o/ original", path: `/o/${userId}/${hdr.key}`, accept: "image/png", vary: "Accept", lastModified: true },
    { what: "/o/ negotiated WebP variant", path: `/o/${userId}/${hdr.key}`, accept: "image/webp", vary: "Accept", lastModified: false },
    { what: "/o/ resized variant", path: `/o/${userId}/${hdr.key}?w=16`, accept: "image/png", vary: "Accept", lastModified: false },
  ];
  const REVALIDATION_HEADERS = ["cache-control", "etag", "vary", "last-modified", "x-content-type-options"];

  test("every 304 repeats the 200's Cache-Control, ETag, Vary and Last-Modified", async () => {
    for (const c of cases()) {
      const ok = await get(c.path, { accept: c.accept });
      expect(`${c.what} ${ok.status}`).toBe(`${c.what} 200`);
      await ok.arrayBuffer();
      const expected = Object.fromEntries(REVALIDATION_HEADERS.map((h) => [h, ok.headers.get(h)]));
      expect({ what: c.what, vary: expected.vary }).toEqual({ what: c.what, vary: c.vary });
      expect({ what: c.what, lastModified: expected["last-modified"] !== null }).toEqual({ what: c.what, lastModified: c.lastModified });
      expect(expected["cache-control"]).toBeTruthy();
      expect(expected.etag).toMatch(/^"[0-9a-f]{64}(-\d+-[a-z]+-[0-9a-z]+)?"$/);

      const cached = await get(c.path, { accept: c.accept, "if-none-match": expected.etag! });
      expect(`${c.what} ${cached.status}`).toBe(`${c.what} 304`);
      expect((await cached.arrayBuffer()).byteLength).toBe(0);
      const got = Object.fromEntries(REVALIDATION_HEADERS.map((h) => [h, cached.headers.get(h)]));
      expect({ what: c.what, ...got }).toEqual({ what: c.what, ...expected });
    }
  });
});
