/**
 * A variant whose render failed is not rendered again on every request (delivery audit H1), and
 * a render that outlived process_timeout_ms is kept when it finally ends. Before, each request
 * for a large image's AVIF started the same encode again (one core and ~1 GiB for a minute, the
 * request getting the original after the timeout), so two anonymous requests could hold every
 * render slot of the site for as long as they liked.
 */
import { beforeAll, describe, expect, test } from "bun:test";
import sharp from "sharp";
import { useAdmin } from "../helpers/fixture";
import { form } from "../helpers/images";
import { metricValue } from "../helpers/metrics";
import { PausePoints } from "../helpers/pause-points";

/** A photo-like JPEG (noise, blurred): slow enough to encode as AVIF that a 100 ms deadline always passes first. */
async function noisyJpeg(width: number, height: number, seed: number) {
  const raw = Buffer.alloc(width * height * 3);
  for (let i = 0; i < raw.length; i++) raw[i] = (i * 7919 + seed * 104729 + (i >> 9) * 31) & 255;
  return sharp(raw, { raw: { width, height, channels: 3 } })
    .blur(1.5)
    .jpeg({ quality: 85 })
    .toBuffer();
}

describe("failed and overlong renders", () => {
  const pauses = new PausePoints();
  const { server, admin } = useAdmin({ env: pauses.env("variant.store") });
  let id = "";
  const renders = (result: string) => metricValue(server.base, `kura_variant_renders_total{format="avif",result="${result}"}`);
  beforeAll(async () => {
    id = (await admin.json("POST", "/api/admin/upload", form(await noisyJpeg(2400, 1600, 3), "photo.jpg"))).id;
    await admin.json("PUT", "/api/admin/config", { process_timeout_ms: 100 });
  });

  test("past the deadline: the original now, no second render while the first runs on, and its result kept", async () => {
    // The late result is parked before it is kept, as a slow disk would hold it.
    pauses.arm("variant.store");
    const first = await fetch(server.url(`/i/${id}?format=avif`));
    expect(first.headers.get("content-type")).toBe("image/jpeg");
    expect(first.headers.get("cache-control")).toBe("no-store");
    expect(await renders("error")).toBe(1);

    // Asked again at once: the original again, without another encode.
    for (let i = 0; i < 3; i++) {
      const again = await fetch(server.url(`/i/${id}?format=avif`));
      expect(again.headers.get("content-type")).toBe("image/jpeg");
      await again.arrayBuffer();
    }
    expect(await renders("error")).toBe(1);
    // And logged once, not once per request.
    expect(server.logs.match(/msg=图片处理失败，返回原图/g)).toHaveLength(1);

    // The first encode ended and is being kept: still the original meanwhile, not a second render (before, the
    // failure was forgotten before the variant was on disk, and a request in between started the encode again).
    await pauses.held("variant.store", 30_000);
    const meanwhile = await fetch(server.url(`/i/${id}?format=avif`));
    expect(meanwhile.headers.get("content-type")).toBe("image/jpeg");
    await meanwhile.arrayBuffer();
    expect(await renders("error")).toBe(1);
    pauses.release("variant.store");

    // The first encode ran to its end and was kept: the variant is served, with no new render.
    const deadline = Date.now() + 30_000;
    let type = "";
    while (Date.now() < deadline) {
      const res = await fetch(server.url(`/i/${id}?format=avif`));
      type = res.headers.get("content-type") ?? "";
      await res.arrayBuffer();
      if (type === "image/avif") {
        expect(res.headers.get("cache-control")).toBe("public, max-age=31536000, immutable");
        break;
      }
      await Bun.sleep(200);
    }
    expect(type).toBe("image/avif");
    expect(await renders("error")).toBe(1);
    expect(await renders("ok")).toBe(0);
    expect(await metricValue(server.base, `kura_variant_late_renders_total{format="avif",result="kept"}`)).toBe(1);
  });
});

describe("a render the deadline killed", () => {
  const { server, admin } = useAdmin();
  const renders = (result: string) => metricValue(server.base, `kura_variant_renders_total{format="webp",result="${result}"}`);
  const lateRenders = (result: string) => metricValue(server.base, `kura_variant_late_renders_total{format="webp",result="${result}"}`);

  test("is tried again as soon as process_timeout_ms is raised, not ten minutes later (settings audit L1)", async () => {
    const { id } = await admin.json("POST", "/api/admin/upload", form(await noisyJpeg(5000, 4000, 9), "large.jpg"));
    // WebP at its slowest method: ~2.5 s of encoding here, which libvips' kill reaches (an AVIF encode reports no progress to it).
    await admin.json("PUT", "/api/admin/config", { process_timeout_ms: 100, process_widths: [4000], process_webp_method: 6 });
    // libvips' own whole-second deadline kills this one: no late result to keep.
    const killed = await fetch(server.url(`/i/${id}?w=4000&format=webp`));
    expect(killed.headers.get("cache-control")).toBe("no-store");
    await killed.arrayBuffer();
    expect(await renders("error")).toBe(1);
    // Killed, not kept late: counted and logged as such (with the limit that stopped it) once it ends.
    const deadline = Date.now() + 30_000;
    while ((await lateRenders("killed")) + (await lateRenders("kept")) < 1 && Date.now() < deadline) await Bun.sleep(100);
    expect([await lateRenders("killed"), await lateRenders("kept")]).toEqual([1, 0]);
    expect(server.logs).toMatch(/msg=超时的渲染被终止，该变体暂以原图提供 .*width=4000 format=webp limit_s=1/);
    const still = await fetch(server.url(`/i/${id}?w=4000&format=webp`));
    expect([still.headers.get("content-type"), still.headers.get("cache-control")]).toEqual(["image/jpeg", "no-store"]);
    await still.arrayBuffer();

    await admin.json("PUT", "/api/admin/config", { process_timeout_ms: 60_000 });
    const res = await fetch(server.url(`/i/${id}?w=4000&format=webp`));
    expect(res.headers.get("content-type")).toBe("image/webp");
    expect(res.headers.get("cache-control")).toBe("public, max-age=31536000, immutable");
    expect(await renders("ok")).toBe(1);
  }, 60_000);
});

describe("renders that find no free slot", () => {
  const { server, admin } = useAdmin();
  const renders = (result: string) => metricValue(server.base, `kura_variant_renders_total{format="webp",result="${result}"}`);

  test("are counted as queue_timeout, not as failed renders, and logged once a minute however many (anyone can send them)", async () => {
    const hog = (await admin.json("POST", "/api/admin/upload", form(await noisyJpeg(3000, 2000, 11), "hog.jpg"))).id;
    const small = (await admin.json("POST", "/api/admin/upload", form(await noisyJpeg(1200, 800, 12), "small.jpg"))).id;
    const widths = [100, 150, 200, 250, 300, 350, 400, 450];
    await admin.json("PUT", "/api/admin/config", { process_workers: 1, process_timeout_ms: 100, process_widths: [...widths, 3000], process_webp_method: 6 });
    // The one slot, held for most of a second by a method-6 WebP of a 6 MP photo (killed at libvips' 1 s at the latest).
    const held = fetch(server.url(`/i/${hog}?w=3000&format=webp`)).then((r) => r.arrayBuffer());
    await Bun.sleep(50);
    const answers = await Promise.all(
      widths.map(async (w) => {
        const res = await fetch(server.url(`/i/${small}?w=${w}&format=webp`));
        await res.arrayBuffer();
        return res.headers.get("content-type");
      }),
    );
    await held;
    const timedOut = await renders("queue_timeout");
    expect(timedOut).toBeGreaterThanOrEqual(3);
    // Each of them got the original, and only the hog's own deadline counts as a failed render.
    expect(answers.filter((t) => t === "image/jpeg").length).toBeGreaterThanOrEqual(timedOut);
    expect(await renders("error")).toBe(1);
    expect(server.logs.match(/level=WARN msg=图片处理繁忙，排队超时，返回原图 /g)).toHaveLength(1);
    expect(server.logs).toMatch(/msg=图片处理繁忙，排队超时，返回原图 image=\S+ err="?等待图片处理超时（排队超过 100 毫秒）"? held_back=0/);
  }, 60_000);
});
