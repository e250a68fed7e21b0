/**
 * Warm `/i/` GETs are answered from a memo of the whole answer (src/delivery/hot-answers.ts),
 * on the main thread and on every delivery thread. Every test here first makes an answer warm
 * (the same GET several times, so it is remembered), then changes something the answer
 * depends on: the very next GET must carry the change, on either thread. Hits must still be
 * counted exactly like answers the pipeline gave (access counts, variant cache hits).
 *
 * Every request goes on a fresh connection (Connection: close), so with one delivery thread
 * the kernel spreads them over both listeners.
 */
import { describe, expect, test } from "bun:test";
import { parseSqlTime } from "../../src/db/time";
import { useAdmin } from "../helpers/fixture";
import { form, makePng } from "../helpers/images";
import { metricValue } from "../helpers/metrics";
import { settled } from "../helpers/settle";

const FRESH = { connection: "close" };
const ROUNDS = 12;

describe.each(["0", "1"])("warm answers with KURA_DELIVERY_THREADS=%s", (threads) => {
  const { server, admin } = useAdmin({ env: { KURA_DELIVERY_THREADS: threads } });
  let seed = 100;

  const upload = async (fields: Record<string, string> = {}) => {
    await admin.json("PUT", "/api/admin/config", { upload_rate_per_min: 10_000, exif_policy: "passthrough", process_widths: [24] });
    const up = await admin.json("POST", "/api/admin/upload", form(await makePng(48, 32, seed++), "warm.png", fields));
    return up.id as string;
  };
  /** `ROUNDS` GETs of `path`, one after the other, each on its own connection. */
  const rounds = async (path: string, headers: Record<string, string> = {}) => {
    const out: Response[] = [];
    for (let i = 0; i < ROUNDS; i++) {
      const res = await fetch(server.url(path), { headers: { ...FRESH, ...headers } });
      await res.arrayBuffer();
      out.push(res);
    }
    return out;
  };
  const statuses = async (path: string, headers: Record<string, string> = {}) => [...new Set((await rounds(path, headers)).map((r) => r.status))];

  test("a deleted image is 404 on the very next GET", async () => {
    const id = await upload();
    expect(await statuses(`/i/${id}`)).toEqual([200]);
    await admin.json("DELETE", `/api/admin/images/${id}`, undefined, 204);
    expect(await statuses(`/i/${id}`)).toEqual([404]);
  });

  test("an image is 404 from the moment it expires, though its row is still cached", async () => {
    // Upload late in a second: the expiry (whole seconds, rounded up) then comes ~1.1 s later,
    // well within the 2 s the looked-up row is reused. The warm-up GETs must all be answered in
    // that ~1.1 s; a loaded machine can take longer, and then the image has simply expired under
    // them: such a try is not a verdict and is made again. A 404 before the expiry always fails.
    let id = "";
    let expiry = 0;
    for (let attempt = 0; attempt < 3 && !id; attempt++) {
      const inSecond = Date.now() % 1000;
      await Bun.sleep(inSecond < 850 ? 850 - inSecond : 1850 - inSecond);
      const candidate = await upload({ ttl: "1" });
      const warm = await statuses(`/i/${candidate}`);
      expiry = parseSqlTime((await admin.json("GET", `/api/admin/images/${candidate}`)).expire_at).getTime();
      if (warm.join() !== "200" && Date.now() >= expiry) continue;
      expect(warm).toEqual([200]);
      id = candidate;
    }
    if (!id) throw new Error("the machine never answered the warm-up GETs before a 1 s TTL ran out (3 tries)");
    await Bun.sleep(Math.max(0, expiry - Date.now() + 40));
    expect(await statuses(`/i/${id}`)).toEqual([404]);
  });

  test("a new hotlink rule and allow_empty_referer apply to the very next GET", async () => {
    const id = await upload();
    const foreign = { referer: "https://elsewhere.example/page" };
    expect(await statuses(`/i/${id}`, foreign)).toEqual([200]);
    expect(await statuses(`/i/${id}`)).toEqual([200]);
    const rule = await admin.json("POST", "/api/admin/referer-whitelist", { pattern: "friend.example" }, 201);
    try {
      expect(await statuses(`/i/${id}`, foreign)).toEqual([403]);
      expect(await statuses(`/i/${id}`)).toEqual([200]); // no Referer: allowed by default
      await admin.json("PUT", "/api/admin/config", { allow_empty_referer: false });
      expect(await statuses(`/i/${id}`)).toEqual([403]);
    } finally {
      await admin.json("PUT", "/api/admin/config", { allow_empty_referer: true });
      await admin.request("DELETE", `/api/admin/referer-whitelist/${rule.id}`);
    }
    expect(await statuses(`/i/${id}`, foreign)).toEqual([200]);
  });

  test("a settings change (process_formats) shows in the very next answer", async () => {
    const id = await upload();
    const webp = { accept: "image/webp,*/*" };
    const types = async () => [...new Set((await rounds(`/i/${id}?w=24`, webp)).map((r) => `${r.status} ${r.headers.get("content-type")}`))];
    expect(await types()).toEqual(["200 image/webp"]);
    await admin.json("PUT", "/api/admin/config", { process_formats: ["jpeg", "png"] });
    try {
      expect(await types()).toEqual(["200 image/png"]);
    } finally {
      await admin.json("PUT", "/api/admin/config", { process_formats: ["webp", "jpeg", "png", "avif"] });
    }
  });

  test("every warm GET counts as an access and every warm variant as a cache hit, exactly once", async () => {
    await admin.json("PUT", "/api/admin/config", { activity_flush_seconds: 1 });
    const id = await upload();
    const hits = 'kura_variant_lookups_total{result="hit"}';
    const misses = 'kura_variant_lookups_total{result="miss"}';
    const before = { hits: await metricValue(server.url(""), hits), misses: await metricValue(server.url(""), misses) };
    const answers = [...(await rounds(`/i/${id}`)), ...(await rounds(`/i/${id}?w=24&format=webp`))];
    expect(new Set(answers.map((r) => r.status))).toEqual(new Set([200]));
    await settled(
      () => admin.json("GET", `/api/admin/images/${id}`),
      (image) => image.access_count >= 2 * ROUNDS,
      2500,
    );
    await Bun.sleep(1200); // one more flush: a double count would show now
    expect((await admin.json("GET", `/api/admin/images/${id}`)).access_count).toBe(2 * ROUNDS);
    // Every variant request is one lookup: a hit or the miss that rendered it (one per thread at most).
    const lookups = async () => (await metricValue(server.url(""), hits)) - before.hits + (await metricValue(server.url(""), misses)) - before.misses;
    expect(await settled(lookups, (total) => total >= ROUNDS, 1000)).toBe(ROUNDS);
  });
});
