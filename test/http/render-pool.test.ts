/**
 * Renders never take the whole libvips thread pool (src/delivery/thread-pool.ts). sharp holds a pool
 * thread for an encode's whole length; with one thread per core (Bun's default, two here), two renders
 * or one PNG's pair of WebP encodes held them all, and every upload (its own sharp steps) and every
 * write's durability fsync waited for the render to end: an 8 KB upload took 98 s behind two AVIF
 * renders. The server runs with the two-thread pool of a two-core machine whatever this one has.
 */
import { describe, expect, test } from "bun:test";
import sharp from "sharp";
import { useAdmin } from "../helpers/fixture";
import { form, makeJpeg, noisePng } from "../helpers/images";

describe("a slow render beside uploads and writes", () => {
  const { server, admin } = useAdmin({ env: { UV_THREADPOOL_SIZE: "2" } });

  test("the start says when the pool holds renders below process_workers, and how to lift it", () => {
    expect(server.logs).toMatch(/msg="图片处理并发低于 process_workers[^\n]*UV_THREADPOOL_SIZE[^\n]* process_workers=2 renders=1 pool=2/);
  });

  test("an upload and an image edit made while two images render to AVIF finish before either render does", async () => {
    // A timeout that lets the renders finish: they must outlast what follows.
    await admin.json("PUT", "/api/admin/config", { process_workers: 2, process_timeout_ms: 120_000 });
    const big = await admin.json("POST", "/api/admin/upload", form(await noisePng(2400, 1600), "noise.png"));
    const events: string[] = [];
    const renders = ["format=avif", "format=avif&w=1920"].map((query) =>
      fetch(server.url(`/i/${big.id}?${query}`)).then(async (r) => {
        await r.arrayBuffer();
        events.push(`render ${r.status} ${r.headers.get("content-type")}`);
      }),
    );
    await Bun.sleep(700); // the renders have begun
    const small = await admin.json("POST", "/api/admin/upload", form(await makeJpeg(32, 24, 5), "small.jpg"));
    events.push("upload");
    await admin.json("PATCH", `/api/admin/images/${small.id}`, { cleanup_exempt: true });
    events.push("edit");
    await Promise.all(renders);
    expect(events).toEqual(["upload", "edit", "render 200 image/avif", "render 200 image/avif"]);
  }, 120_000);

  test("an AVIF above 8.3 MP is not encoded (over 1 GiB for a camera photo): the original with no-store; a resized one is", async () => {
    const flat = await sharp({ create: { width: 4000, height: 2200, channels: 3, background: "#3a6" } })
      .jpeg()
      .toBuffer();
    const image = await admin.json("POST", "/api/admin/upload", form(flat, "wide.jpg"));
    const full = await fetch(server.url(`/i/${image.id}?format=avif`));
    const body = Buffer.from(await full.arrayBuffer());
    expect([full.status, full.headers.get("content-type"), full.headers.get("cache-control")]).toEqual([200, "image/jpeg", "no-store"]);
    expect((await sharp(body).metadata()).width).toBe(4000);
    const resized = await fetch(server.url(`/i/${image.id}?format=avif&w=1920`));
    await resized.arrayBuffer();
    expect([resized.status, resized.headers.get("content-type")]).toEqual([200, "image/avif"]);
    // Turned a quarter by its EXIF tag: w is the displayed width, so 1920 keeps 1920 x 8400 (16 MP).
    const turned = await sharp({ create: { width: 8400, height: 2200, channels: 3, background: "#a63" } })
      .withMetadata({ orientation: 6 })
      .jpeg()
      .toBuffer();
    const panorama = await admin.json("POST", "/api/admin/upload", form(turned, "turned.jpg", { exif_policy: "passthrough" }));
    const tall = await fetch(server.url(`/i/${panorama.id}?format=avif&w=1920`));
    await tall.arrayBuffer();
    expect([tall.status, tall.headers.get("content-type"), tall.headers.get("cache-control")]).toEqual([200, "image/jpeg", "no-store"]);
  }, 60_000);
});
