// Delivery speed: GET /i/{id} of a ~200 KB JPEG original next to nginx sending the same file
// from disk (target >= 0.9 x nginx), a warm WebP variant from the variant cache (target >= 0.9 x
// nginx sending the same WebP), each also next to a bare Bun.serve sending the same bytes from
// memory (the floor any Bun server reaches on this machine), and cold
// variants (first request for a width) next to sharp called in-process with the same settings
// (target p50 <= 1.2 x sharp). Load from wrk; nginx and wrk are Debian packages.
//
//   bun run bench/delivery.ts [--duration 8] [--connections 32] [--threads 2] [--cold 50]
//                             [--entry other/src/main.ts] [--profile-dir DIR] [--json]
import { cpus } from "node:os";
import { type BunFloor, kuraDeliveryThreads, startBunFloor } from "./lib/bare-delivery-server";
import { flagValue, hasFlag, intFlag } from "./lib/args";
import { coldWidths, runColdVariants, type ColdSeries, type WebpSettings } from "./lib/cold-variants";
import { makeJpeg, PHOTO_200KB } from "./lib/jpegs";
import { measuredWrk, pooledRate, type LoadRun } from "./lib/load-run";
import { machineSummary } from "./lib/machine";
import { counterValue } from "./lib/metrics";
import { multipartFile } from "./lib/multipart";
import { haveNginx, NginxServer } from "./lib/nginx";
import { BenchServer } from "./lib/server";
import { adminSession, type BenchSession } from "./lib/session";
import { fmtMiB, fmtMs, fmtRate, percentile, table } from "./lib/stats";
import { haveWrk } from "./lib/wrk";

const TARGET_ORIGINAL = 0.9;
const TARGET_WARM = 0.9;
const TARGET_COLD = 1.2;
const WARM_WIDTH = 640;
const MAX_COLD = 63; // process_widths holds at most 64 entries, one is the warm width

const argv = process.argv.slice(2);
const durationS = intFlag(argv, "duration", 8);
const connections = intFlag(argv, "connections", 32);
const threads = intFlag(argv, "threads", 2);
const coldCount = intFlag(argv, "cold", 50);
const entry = flagValue(argv, "entry");
const profileDir = flagValue(argv, "profile-dir");
const asJson = hasFlag(argv, "json");
if (coldCount > MAX_COLD) throw new Error(`--cold 最多 ${MAX_COLD}（process_widths 最多 64 项）`);
if (threads > connections) throw new Error("--threads 不能大于 --connections");

const log = (msg: string) => console.error(msg);
const WEBP = { accept: "image/webp" };

interface Pair {
  name: string;
  kura: LoadRun;
  nginx: LoadRun[];
  /** The bare Bun floor, right before and right after Kura. */
  floor: LoadRun[];
  /** Kura rate / nginx rate (nginx halves before and after, pooled). */
  ratio: number;
  /** Kura rate / the bare Bun floor's rate (its halves pooled). */
  floorRatio: number;
}

/**
 * nginx for half the duration, the bare Bun floor for half, Kura for the full duration, then
 * the floor and nginx again for the other halves: the machine's speed drifts, and this compares
 * Kura with both references on both sides of it. Each gets a short unmeasured run first (JIT,
 * page cache, connection setup). nginx and the floor serve the same bytes under `refPath`.
 */
async function comparePair(
  name: string,
  server: BenchServer,
  kuraPath: string,
  nginx: NginxServer,
  floor: BenchServer,
  refPath: string,
  headers: Record<string, string>,
): Promise<Pair> {
  const half = Math.max(1, Math.round(durationS / 2));
  const base = { connections, threads, headers };
  const onNginx = (d: number) => measuredWrk({ ...base, url: nginx.url(refPath), durationS: d }, () => nginx.cpuMs());
  const onFloor = (d: number) => measuredWrk({ ...base, url: floor.url(refPath), durationS: d }, () => floor.cpuMs());
  const onKura = (d: number) =>
    measuredWrk(
      { ...base, url: server.url(kuraPath), durationS: d },
      () => server.cpuMs(),
      () => server.mainThreadCpuMs(),
    );
  log(`${name}：预热 …`);
  await onNginx(1);
  await onFloor(1);
  await onKura(1);
  log(`${name}：nginx ${half}s，Bun ${half}s，Kura ${durationS}s，Bun ${half}s，nginx ${half}s …`);
  const before = await onNginx(half);
  const floorBefore = await onFloor(half);
  const kura = await onKura(durationS);
  const floorAfter = await onFloor(half);
  const after = await onNginx(half);
  const nginxRuns = [before, after];
  const floorRuns = [floorBefore, floorAfter];
  return {
    name,
    kura,
    nginx: nginxRuns,
    floor: floorRuns,
    ratio: kura.perSecond / pooledRate(nginxRuns),
    floorRatio: kura.perSecond / pooledRate(floorRuns),
  };
}

interface Fetched {
  bytes: Uint8Array;
  type: string | null;
  headers: Headers;
}

async function fetchBytes(url: string, headers: Record<string, string> = {}): Promise<Fetched> {
  const res = await fetch(url, { headers });
  const bytes = new Uint8Array(await res.arrayBuffer());
  if (res.status !== 200) throw new Error(`GET ${url}：HTTP ${res.status}：${new TextDecoder().decode(bytes.slice(0, 300))}`);
  return { bytes, type: res.headers.get("content-type"), headers: res.headers };
}

async function uploadOriginal(admin: BenchSession, jpeg: Uint8Array): Promise<string> {
  const b = multipartFile(jpeg, "delivery-bench.jpg", "image/jpeg");
  const res = await fetch(admin.server.url("/api/admin/upload"), {
    method: "POST",
    headers: { ...admin.authHeaders(), "content-type": b.contentType },
    body: b.body,
  });
  const text = await res.text();
  if (res.status !== 200) throw new Error(`上传失败：HTTP ${res.status}：${text}`);
  return (JSON.parse(text) as { id: string }).id;
}

const sameBytes = (a: Uint8Array, b: Uint8Array) => Buffer.from(a).equals(b);
const coldSummary = (s: ColdSeries) => ({
  perSecond: s.latenciesMs.length / (s.wallMs / 1000),
  p50Ms: percentile(s.latenciesMs, 50),
  p99Ms: percentile(s.latenciesMs, 99),
  cpuMsPerOp: s.cpuMs / s.latenciesMs.length,
});

async function main() {
  const started = performance.now();
  if (!haveWrk() || !haveNginx()) throw new Error("需要 wrk 和 nginx（Debian：apt-get install -y wrk nginx）");
  const jpeg = await makeJpeg(PHOTO_200KB, 1);
  const widths = coldWidths(coldCount, PHOTO_200KB.width - 24, WARM_WIDTH);

  const bunArgs = profileDir ? ["--cpu-prof", "--cpu-prof-md", `--cpu-prof-dir=${profileDir}`, "--cpu-prof-name=delivery"] : [];
  const server = await BenchServer.start({ entry, bunArgs });
  let nginx: NginxServer | undefined;
  let floor: BunFloor | undefined;
  try {
    const admin = await adminSession(server);
    // passthrough: /i/{id} then serves exactly the bytes nginx serves.
    await admin.setConfig({ exif_policy: "passthrough", process_widths: [WARM_WIDTH, ...widths], upload_rate_per_min: 1_000_000 });
    const full = await admin.json<{ settings: { process_quality_webp: number; process_webp_method: number; process_timeout_ms: number } }>(
      "GET",
      "/api/admin/config/full",
    );
    const webp: WebpSettings = {
      quality: full.settings.process_quality_webp,
      effort: full.settings.process_webp_method,
      timeoutMs: full.settings.process_timeout_ms,
    };
    const id = await uploadOriginal(admin, jpeg);

    const original = await fetchBytes(server.url(`/i/${id}`));
    if (!sameBytes(original.bytes, jpeg)) throw new Error("GET /i/{id} 返回的字节与上传的 JPEG 不同（exif_policy 未生效？）");
    const variant = await fetchBytes(server.url(`/i/${id}?w=${WARM_WIDTH}`), WEBP); // renders and caches it
    if (variant.type !== "image/webp") throw new Error(`变体的类型是 ${variant.type}，不是 image/webp`);
    if (!sameBytes((await fetchBytes(server.url(`/i/${id}?w=${WARM_WIDTH}`), WEBP)).bytes, variant.bytes)) throw new Error("同一变体两次返回的字节不同");

    nginx = await NginxServer.start({ "original.jpg": jpeg, "variant.webp": variant.bytes });
    if (!sameBytes((await fetchBytes(nginx.url("/original.jpg"))).bytes, jpeg)) throw new Error("nginx 返回的字节与原图不同");
    floor = await startBunFloor({ "original.jpg": original, "variant.webp": variant });
    if (!sameBytes((await fetchBytes(floor.server.url("/variant.webp"))).bytes, variant.bytes)) throw new Error("裸 Bun 服务返回的字节与变体不同");

    // Renders counted by the server itself: the warm runs must cause none, and every cold
    // request exactly one, or the numbers measure something else than their label says.
    const renders = () => counterValue(server, "kura_variant_renders_total", { format: "webp", result: "ok" });
    const rendersBefore = await renders();
    const rssAfterSetup = server.peakRssBytes();
    // Who answered: the delivery threads (README "Delivery threads") or the main thread.
    const answered = async () => ({
      threads: await counterValue(server, "kura_delivery_thread_answers_total"),
      all: await counterValue(server, "kura_http_requests_total", { route: "/i/:id" }),
    });
    const shareOf = async (run: () => Promise<Pair>) => {
      const before = await answered();
      const pair = await run();
      const after = await answered();
      return { pair, threadShare: (after.threads - before.threads) / Math.max(1, after.all - before.all) };
    };
    const web = nginx;
    const bun = floor.server;
    const originalRun = await shareOf(() => comparePair("原图", server, `/i/${id}`, web, bun, "/original.jpg", {}));
    // Accept: image/webp without w would also be a (full-size) variant; the original run sends none.
    const variantRun = await shareOf(() => comparePair(`热变体 w=${WARM_WIDTH}`, server, `/i/${id}?w=${WARM_WIDTH}`, web, bun, "/variant.webp", WEBP));
    const originalPair = originalRun.pair;
    const variantPair = variantRun.pair;
    const threadCount = await counterValue(server, "kura_delivery_threads");
    const rssAfterWarm = server.peakRssBytes();
    if ((await renders()) !== rendersBefore) throw new Error("热变体测量期间服务端重新生成了变体（缓存未命中），结果无效");
    await nginx.dispose();
    nginx = undefined;
    await floor.dispose();
    floor = undefined;

    log(`冷变体：${widths.length} 个新宽度，逐个请求 …`);
    const cold = await runColdVariants(server, id, jpeg, widths, WARM_WIDTH, webp);
    const rssEnd = server.peakRssBytes();
    const coldRenders = (await renders()) - rendersBefore;
    if (coldRenders !== widths.length) throw new Error(`冷变体请求应各生成一次变体（${widths.length} 次），服务端实际生成 ${coldRenders} 次`);

    const sharpS = coldSummary(cold.sharp);
    const renderS = coldSummary(cold.render);
    const kuraS = coldSummary(cold.kura);
    const coldRatio = kuraS.p50Ms / sharpS.p50Ms;
    // Same width on both sides: less sensitive to which widths happen to sit at the median.
    const pairedRatio = percentile(
      cold.kura.latenciesMs.map((ms, i) => ms / cold.sharp.latenciesMs[i]!),
      50,
    );

    const referenceRow = (label: string, runs: LoadRun[], ratio: string) => [
      label,
      fmtRate(pooledRate(runs)),
      fmtMs(avg(runs.map((r) => r.p50Ms))),
      fmtMs(avg(runs.map((r) => r.p99Ms))),
      ratio,
      avg(runs.map((r) => r.serverCpuMsPerReq)).toFixed(3),
      avg(runs.map((r) => r.serverCores)).toFixed(2),
      "-",
      avg(runs.map((r) => r.otherCores)).toFixed(2),
    ];
    const floorLabel = `bare Bun.serve, same bytes from memory (${1 + kuraDeliveryThreads()} listeners)`;
    const pairRows = (p: Pair, label: string, nginxLabel: string) => [
      referenceRow(nginxLabel, p.nginx, "1.00"),
      referenceRow(floorLabel, p.floor, (pooledRate(p.floor) / pooledRate(p.nginx)).toFixed(2)),
      [
        label,
        fmtRate(p.kura.perSecond),
        fmtMs(p.kura.p50Ms),
        fmtMs(p.kura.p99Ms),
        p.ratio.toFixed(2),
        p.kura.serverCpuMsPerReq.toFixed(3),
        p.kura.serverCores.toFixed(2),
        fmtMiB(rssAfterWarm),
        p.kura.otherCores.toFixed(2),
      ],
    ];
    console.log(`\nKura delivery bench — ${new Date().toISOString()} — ${machineSummary()}`);
    console.log(
      `${PHOTO_200KB.width}x${PHOTO_200KB.height} JPEG, ${(jpeg.byteLength / 1024).toFixed(0)} KB; warm variant w=${WARM_WIDTH} webp ${(variant.bytes.byteLength / 1024).toFixed(0)} KB; ` +
        `wrk -t${threads} -c${connections}, ${durationS} s per Kura run (nginx: ${Math.max(1, Math.round(durationS / 2))} s before + after); ` +
        `webp quality ${webp.quality} effort ${webp.effort}\n`,
    );
    console.log(
      table(
        ["run", "per s", "p50 ms", "p99 ms", "ratio", "CPU ms/op", "server cores", "peak RSS MiB", "other load"],
        [
          ...pairRows(originalPair, "Kura GET /i/{id} (original)", "nginx: original.jpg from disk"),
          ...pairRows(variantPair, `Kura GET /i/{id}?w=${WARM_WIDTH} Accept webp (warm)`, "nginx: the same webp from disk"),
          [
            "sharp in-process: resize + webp (cold ref)",
            fmtRate(sharpS.perSecond),
            fmtMs(sharpS.p50Ms),
            fmtMs(sharpS.p99Ms),
            "1.00",
            sharpS.cpuMsPerOp.toFixed(2),
            "-",
            "-",
            "-",
          ],
          [
            "renderVariant in-process (Kura's code)",
            fmtRate(renderS.perSecond),
            fmtMs(renderS.p50Ms),
            fmtMs(renderS.p99Ms),
            (renderS.p50Ms / sharpS.p50Ms).toFixed(2),
            renderS.cpuMsPerOp.toFixed(2),
            "-",
            "-",
            "-",
          ],
          [
            `Kura GET /i/{id}?w=<new> Accept webp (cold)`,
            fmtRate(kuraS.perSecond),
            fmtMs(kuraS.p50Ms),
            fmtMs(kuraS.p99Ms),
            coldRatio.toFixed(2),
            kuraS.cpuMsPerOp.toFixed(2),
            "-",
            fmtMiB(rssEnd),
            "-",
          ],
        ],
      ),
    );
    console.log(
      `\nratio: rate / nginx rate (throughput rows; Kura / the bare Bun floor: original ${originalPair.floorRatio.toFixed(2)}, warm ${variantPair.floorRatio.toFixed(2)}); Kura p50 / sharp p50 (cold rows, ${widths.length} sequential requests each, widths ${widths[0]}..${widths.at(-1)}; ` +
        `p99 of so few is about the largest width). Median of per-width Kura/sharp ratios: ${pairedRatio.toFixed(2)}.` +
        `\nCPU ms/op: server process (Kura: all threads; nginx: master + workers) per request; this process per render for the in-process rows.` +
        `\nserver cores: average cores the server used during the run (nginx: master + ${cpus().length} workers; Kura: all threads). ` +
        `Kura's main thread (all HTTP and JS work): ${[originalPair, variantPair].map((p) => (p.kura.mainThreadCores ?? 0).toFixed(2)).join(" / ")} cores; ` +
        `one thread next to wrk's ${threads} gets about ${(cpus().length / (1 + threads)).toFixed(2)} of ${cpus().length} cores from a fair scheduler when nothing else runs.` +
        `\ndelivery threads (KURA_DELIVERY_THREADS=${process.env.KURA_DELIVERY_THREADS ?? "auto"}): ${threadCount} running; they answered ` +
        `${[originalRun, variantRun].map((r) => `${(r.threadShare * 100).toFixed(0)}%`).join(" / ")} of /i/ (the rest: the main thread).` +
        `\npeak RSS: Kura's VmHWM after the throughput runs / at the end. wrk CPU per request: ${[originalPair, variantPair].map((p) => (p.kura.clientCpuMs / p.kura.requests).toFixed(3)).join(" / ")} ms.` +
        `\nserver-side renders (kura_variant_renders_total): 0 during the warm runs, ${coldRenders} for ${widths.length} cold requests.` +
        (cold.mismatchedWidths.length
          ? `\n注意：${cold.mismatchedWidths.length} 个宽度的服务端输出与 renderVariant 不同（设置不一致？）：${cold.mismatchedWidths.join(", ")}`
          : "\ncold outputs: byte-identical to renderVariant for every width."),
    );
    const verdict = (ok: boolean) => (ok ? "PASS" : "FAIL");
    console.log(`\noriginal vs nginx >= ${TARGET_ORIGINAL}: ${verdict(originalPair.ratio >= TARGET_ORIGINAL)} (${originalPair.ratio.toFixed(2)})`);
    console.log(`warm variant vs nginx >= ${TARGET_WARM}: ${verdict(variantPair.ratio >= TARGET_WARM)} (${variantPair.ratio.toFixed(2)})`);
    console.log(`cold variant p50 vs sharp <= ${TARGET_COLD}: ${verdict(coldRatio <= TARGET_COLD)} (${coldRatio.toFixed(2)})`);
    console.log(`total ${((performance.now() - started) / 1000).toFixed(1)} s`);
    if (asJson) {
      const pairJson = (p: Pair) => ({
        kura: p.kura,
        nginx: p.nginx,
        nginx_per_second: pooledRate(p.nginx),
        ratio: p.ratio,
        bun_floor: p.floor,
        bun_floor_per_second: pooledRate(p.floor),
        ratio_to_bun_floor: p.floorRatio,
      });
      console.log(
        JSON.stringify({
          date: new Date().toISOString(),
          duration_s: durationS,
          connections,
          threads,
          jpeg_bytes: jpeg.byteLength,
          variant_bytes: variant.bytes.byteLength,
          webp,
          original: pairJson(originalPair),
          warm_variant: pairJson(variantPair),
          delivery_threads: { running: threadCount, share_original: originalRun.threadShare, share_warm: variantRun.threadShare },
          cold: {
            widths,
            sharp: sharpS,
            render_variant: renderS,
            kura: kuraS,
            ratio: coldRatio,
            paired_median_ratio: pairedRatio,
            mismatched_widths: cold.mismatchedWidths,
          },
          peak_rss_bytes: { after_setup: rssAfterSetup, after_throughput: rssAfterWarm, end: rssEnd },
          pass: { original: originalPair.ratio >= TARGET_ORIGINAL, warm: variantPair.ratio >= TARGET_WARM, cold: coldRatio <= TARGET_COLD },
        }),
      );
    }
  } finally {
    await nginx?.dispose();
    await floor?.dispose();
    await server.dispose();
  }
}

const avg = (xs: readonly number[]) => xs.reduce((s, x) => s + x, 0) / xs.length;

await main();
