// Upload throughput: POST /api/admin/upload of ~200 KB distinct JPEGs at concurrency 8,
// next to a bare Bun HTTP server doing multipart parsing + sha256 + sharp metadata + an
// fsync'd write (the reference) and an in-process baseline of the same work without HTTP,
// all measured in the same run. Target: upload rate >= 0.8 x the bare server's rate.
//
//   bun run bench/upload.ts [--n 200] [--concurrency 8] [--warmup 8] [--baseline-ms 1000]
//                           [--policies strip,passthrough] [--entry other/src/main.ts]
//                           [--profile-dir DIR] [--mature-store] [--rounds 1] [--json]
import { flagValue, hasFlag, intFlag } from "./lib/args";
import { makeJpegs, PHOTO_200KB } from "./lib/jpegs";
import { BackgroundLoad, machineSummary, ownCpuMs, threadCpuMs } from "./lib/machine";
import { multipartFile, type MultipartBody } from "./lib/multipart";
import { BenchServer } from "./lib/server";
import { adminSession, type BenchSession } from "./lib/session";
import { fmtMiB, fmtMs, fmtRate, runPool, summarize, table, type RunResult, type Summary } from "./lib/stats";
import { runBaseline, type BaselineResult } from "./lib/upload-baseline";
import { BARE_READY } from "./lib/bare-upload-server";
import { counterValue } from "./lib/metrics";
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { DEFAULT_STORAGE_PATH } from "../src/channels/seed";
import { stripMetadataToBuffer } from "../src/images/exif";

const TARGET_RATIO = 0.8;
const BARE_ENTRY = new URL("./lib/bare-upload-server.ts", import.meta.url).pathname;
type Policy = "strip" | "passthrough";

const argv = process.argv.slice(2);
const n = intFlag(argv, "n", 200);
const concurrency = intFlag(argv, "concurrency", 8);
const warmup = intFlag(argv, "warmup", 8);
const baselineMs = intFlag(argv, "baseline-ms", 1000);
const entry = flagValue(argv, "entry");
const profileDir = flagValue(argv, "profile-dir");
const asJson = hasFlag(argv, "json");
/** Create the fan-out directories the uploads will need before the run, as in a store that has them all. */
const matureStore = hasFlag(argv, "mature-store");
/** Split each Kura run into this many slices, each between two bare-server slices of the same bodies. */
const rounds = intFlag(argv, "rounds", 1);
if (rounds < 1 || rounds > n) throw new Error(`--rounds 必须在 1 到 --n 之间，收到 ${rounds}`);
const policies = (flagValue(argv, "policies") ?? "strip,passthrough").split(",") as Policy[];
for (const p of policies) if (p !== "strip" && p !== "passthrough") throw new Error(`--policies 只能包含 strip、passthrough，收到 ${p}`);

const log = (msg: string) => console.error(msg);

interface UploadRow {
  policy: Policy;
  summary: Summary;
  /** Server process CPU (all threads) per upload, ms. */
  serverCpuMs: number;
  /** The same split by thread group (JS thread, Bun's pool, the rest), ms per upload. */
  threads: ThreadCpu;
  /** This (client) process's CPU per upload, ms: on a small machine it competes with the server. */
  clientCpuMs: number;
  /** SQLite commits per upload (group commit shares one among the uploads of a loop turn). */
  commitsPerUpload: number;
  peakRssBytes: number;
  /** Average cores busy with other processes during the run. */
  otherCores: number;
  /** Baseline rate measured right before and right after this run, averaged. */
  baselinePerSecond: number;
  /** Bare server rate measured right before and right after this run, averaged. */
  barePerSecond: number;
  /** With --rounds: each slice's rate / the mean of the bare slices right before and after it. */
  sliceRatios: number[];
  /** With --rounds: Kura's rate in each slice, and the bare server's in the slices around them. */
  sliceRates: number[];
  bareSliceRates: number[];
}

type ThreadCpu = ReturnType<typeof threadCpuMs>;

/** Per-operation CPU of each thread group between two readings. */
function threadsPerOp(before: ThreadCpu, after: ThreadCpu, count: number): ThreadCpu {
  const per = (k: keyof ThreadCpu) => (after[k] - before[k]) / count;
  return { main: per("main"), pool: per("pool"), other: per("other"), faults: per("faults") };
}

const fmtThreads = (t: ThreadCpu) => `${t.main.toFixed(2)} / ${t.pool.toFixed(2)} / ${t.other.toFixed(2)}`;

interface BareSegment {
  run: RunResult;
  serverCpuMs: number;
  threads: ThreadCpu;
  otherCores: number;
}

/** The bare reference server, same client, same bodies, same concurrency as the Kura runs. */
async function bareSegment(bare: BenchServer, bodies: MultipartBody[]): Promise<BareSegment> {
  const cpu0 = bare.cpuMs();
  const threads0 = threadCpuMs(bare.pid);
  const load = new BackgroundLoad(() => bare.cpuMs() + ownCpuMs());
  const run = await runPool(bodies, concurrency, async (b) => {
    const res = await fetch(bare.url("/upload"), { method: "POST", headers: { "content-type": b.contentType }, body: b.body });
    const text = await res.text();
    if (res.status !== 200) throw new Error(`参照服务器上传失败：HTTP ${res.status}：${text}`);
  });
  return { run, serverCpuMs: (bare.cpuMs() - cpu0) / run.count, threads: threadsPerOp(threads0, threadCpuMs(bare.pid), run.count), otherCores: load.cores() };
}

/** Splits `items` into `count` consecutive slices of near-equal size. */
function slices<T>(items: readonly T[], count: number): T[][] {
  return Array.from({ length: count }, (_, i) => items.slice(Math.round((i * items.length) / count), Math.round(((i + 1) * items.length) / count)));
}

const median = (values: number[]) => {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
};

/**
 * Untimed uploads each server gets right before each of its slices. A server left idle while
 * the other one runs hands freed memory back to the kernel (Kura's page faults per upload rose
 * from ~20 to 60–90 with bare slices in between), so each slice starts warm, as a busy
 * server would be.
 */
const SLICE_WARMUP = 48;

/**
 * One fresh server per policy: a fresh database means no blob dedup across runs. With
 * `--rounds R` the measured uploads go in R slices, and before each slice (and after the last)
 * the bare server takes the same slice: this VM's speed swings by 2x within seconds, and a
 * slice ratio compares two rates taken a second apart. `sliceWarm` holds R groups of distinct
 * images (never uploaded otherwise) for the warm-up before each slice.
 */
async function benchUploads(
  policy: Policy,
  warm: MultipartBody[],
  bodies: MultipartBody[],
  sliceWarm: MultipartBody[][],
  images: Uint8Array[],
  bare: BenchServer,
) {
  const bunArgs = profileDir ? ["--cpu-prof", "--cpu-prof-md", `--cpu-prof-dir=${profileDir}`, `--cpu-prof-name=upload-${policy}`] : [];
  const server = await BenchServer.start({ entry, bunArgs });
  try {
    if (matureStore) await createFanOutDirs(server, policy, images);
    const admin = await adminSession(server);
    // Admission limits would turn a throughput test into a 429 test.
    await admin.setConfig({ upload_rate_per_min: 1_000_000, max_concurrent_uploads: 10_000, exif_policy: policy });
    await runPool(warm, concurrency, (b) => upload(admin, b));
    // The bare slices' CPU is neither "other load" nor the client's work for Kura.
    const load = new BackgroundLoad(() => server.cpuMs() + bare.cpuMs() + ownCpuMs());
    let clientMs = 0;
    let serverMs = 0;
    let threads: ThreadCpu = { main: 0, pool: 0, other: 0, faults: 0 };
    const parts = rounds > 1 ? slices(bodies, rounds) : [bodies];
    const bareRates: number[] = [];
    const bareSlice = async (i: number) => {
      await bareSegment(bare, sliceWarm[i]!);
      bareRates.push(rate((await bareSegment(bare, parts[i]!)).run));
    };
    const kura: RunResult[] = [];
    let commits = 0;
    for (const [i, part] of parts.entries()) {
      if (rounds > 1) {
        await bareSlice(i);
        await runPool(sliceWarm[i]!, concurrency, (b) => upload(admin, b));
      }
      // Only the timed uploads are counted: CPU, threads and the client's own work.
      const server0 = server.cpuMs();
      const threads0 = threadCpuMs(server.pid);
      const client0 = ownCpuMs();
      const commits0 = await counterValue(server, "kura_db_group_commits_total");
      kura.push(await runPool(part, concurrency, (b) => upload(admin, b)));
      commits += (await counterValue(server, "kura_db_group_commits_total")) - commits0;
      clientMs += ownCpuMs() - client0;
      serverMs += server.cpuMs() - server0;
      const delta = threadsPerOp(threads0, threadCpuMs(server.pid), 1);
      threads = { main: threads.main + delta.main, pool: threads.pool + delta.pool, other: threads.other + delta.other, faults: threads.faults + delta.faults };
    }
    if (rounds > 1) await bareSlice(parts.length - 1);
    const run: RunResult = {
      count: kura.reduce((s, r) => s + r.count, 0),
      wallMs: kura.reduce((s, r) => s + r.wallMs, 0),
      latenciesMs: kura.flatMap((r) => r.latenciesMs),
    };
    return {
      run,
      sliceRatios: rounds > 1 ? kura.map((r, i) => rate(r) / ((bareRates[i]! + bareRates[i + 1]!) / 2)) : [],
      sliceRates: kura.map(rate),
      bareSliceRates: bareRates,
      serverCpuMs: serverMs / run.count,
      threads: threadsPerOp({ main: 0, pool: 0, other: 0, faults: 0 }, threads, run.count),
      clientCpuMs: clientMs / run.count,
      commitsPerUpload: commits / run.count,
      otherCores: load.cores(),
      peakRssBytes: server.peakRssBytes(),
    };
  } finally {
    await server.dispose();
  }
}

/**
 * The `img/ab/cd` directories of the bytes Kura will store (the stripped bytes for `strip`),
 * made in the default channel before the run: a store that has served ~1M uploads has all
 * 65,536 of them, a new one creates one for nearly every upload.
 */
async function createFanOutDirs(server: BenchServer, policy: Policy, images: Uint8Array[]) {
  for (const image of images) {
    const stored = policy === "strip" ? await stripMetadataToBuffer(Buffer.from(image), "image/jpeg") : image;
    const sha = new Bun.CryptoHasher("sha256").update(stored).digest("hex");
    mkdirSync(join(server.dataDir, DEFAULT_STORAGE_PATH, "img", sha.slice(0, 2), sha.slice(2, 4)), { recursive: true });
  }
}

async function upload(admin: BenchSession, b: MultipartBody): Promise<void> {
  const res = await fetch(admin.server.url("/api/admin/upload"), {
    method: "POST",
    headers: { ...admin.authHeaders(), "content-type": b.contentType },
    body: b.body,
  });
  const text = await res.text();
  if (res.status !== 200) throw new Error(`上传失败：HTTP ${res.status}：${text}`);
  if (typeof (JSON.parse(text) as { id?: unknown }).id !== "string") throw new Error(`上传响应缺少 id：${text}`);
}

/** Baseline segment; its background load is measured the same way as for uploads. */
async function baselineSegment(images: Uint8Array[]): Promise<BaselineResult & { otherCores: number }> {
  const load = new BackgroundLoad(ownCpuMs);
  const result = await runBaseline(images, concurrency, baselineMs);
  return { ...result, otherCores: load.cores() };
}

const rate = (r: RunResult) => r.count / (r.wallMs / 1000);

async function main() {
  const started = performance.now();
  const sliceWarmCount = rounds > 1 ? rounds * SLICE_WARMUP : 0;
  log(`生成 ${n + warmup + sliceWarmCount} 张不同的 JPEG（${PHOTO_200KB.width}x${PHOTO_200KB.height}，约 200 KB）…`);
  const images = await makeJpegs(PHOTO_200KB, n + warmup + sliceWarmCount);
  const distinct = new Set(images.map((b) => new Bun.CryptoHasher("sha256").update(b).digest("hex")));
  if (distinct.size !== images.length) throw new Error("生成的图片有重复，去重会让结果失真");
  const measured = images.slice(0, n);
  const warmImages = images.slice(n, n + warmup);
  const sliceWarmImages = images.slice(n + warmup);
  const avgKb = measured.reduce((s, b) => s + b.byteLength, 0) / measured.length / 1024;
  const toBody = (b: Uint8Array, i: number) => multipartFile(b, `bench-${i}.jpg`, "image/jpeg");

  // The machine's speed drifts (other jobs, disk cache state), so baseline segments are
  // interleaved with the upload runs and each run is compared with its neighbours.
  log("基准预热 …");
  await runBaseline(warmImages, concurrency);
  const bare = await BenchServer.start({ entry: BARE_ENTRY, ready: BARE_READY });
  const bares: BareSegment[] = [];
  const baselines: (BaselineResult & { otherCores: number })[] = [];
  const uploads: UploadRow[] = [];
  let bareRss = 0;
  try {
    await bareSegment(bare, warmImages.map(toBody));
    bares.push(await bareSegment(bare, measured.map(toBody)));
    baselines.push(await baselineSegment(measured));
    for (const policy of policies) {
      log(`上传：exif_policy=${policy} …`);
      const sliceWarm = slices(sliceWarmImages.map(toBody), rounds);
      const r = await benchUploads(policy, warmImages.map(toBody), measured.map(toBody), sliceWarm, images, bare);
      bares.push(await bareSegment(bare, measured.map(toBody)));
      baselines.push(await baselineSegment(measured));
      const around = (rate(baselines.at(-2)!) + rate(baselines.at(-1)!)) / 2;
      const bareAround = (rate(bares.at(-2)!.run) + rate(bares.at(-1)!.run)) / 2;
      uploads.push({ policy, summary: summarize(r.run), ...r, baselinePerSecond: around, barePerSecond: bareAround });
    }
    bareRss = bare.peakRssBytes();
  } finally {
    await bare.dispose();
  }
  const bareAll: RunResult = {
    count: bares.reduce((s, b) => s + b.run.count, 0),
    wallMs: bares.reduce((s, b) => s + b.run.wallMs, 0),
    latenciesMs: bares.flatMap((b) => b.run.latenciesMs),
  };
  const bareSummary = summarize(bareAll);
  const bareCpu = bares.reduce((s, b) => s + b.serverCpuMs * b.run.count, 0) / bareAll.count;
  const bareThreads = (k: keyof ThreadCpu) => bares.reduce((s, b) => s + b.threads[k] * b.run.count, 0) / bareAll.count;
  const bareSplit: ThreadCpu = { main: bareThreads("main"), pool: bareThreads("pool"), other: bareThreads("other"), faults: bareThreads("faults") };
  const bareOther = bares.reduce((s, b) => s + b.otherCores, 0) / bares.length;

  const all: RunResult = {
    count: baselines.reduce((s, b) => s + b.count, 0),
    wallMs: baselines.reduce((s, b) => s + b.wallMs, 0),
    latenciesMs: baselines.flatMap((b) => b.latenciesMs),
  };
  const baseCpu = baselines.reduce((s, b) => s + b.cpuMsPerOp * b.count, 0) / all.count;
  const baseOther = baselines.reduce((s, b) => s + b.otherCores, 0) / baselines.length;
  const base = summarize(all);
  // With slices the ratio is their median: one slow second on either side moves it little.
  const ratio = (u: UploadRow) => (u.sliceRatios.length ? median(u.sliceRatios) : u.summary.perSecond / u.barePerSecond);
  const vsInProcess = (u: UploadRow) => u.summary.perSecond / u.baselinePerSecond;

  console.log(`\nKura upload bench — ${new Date().toISOString()} — ${machineSummary()}`);
  console.log(
    `${n} distinct JPEGs, ${PHOTO_200KB.width}x${PHOTO_200KB.height}, avg ${avgKb.toFixed(0)} KB, concurrency ${concurrency}, ${warmup} warm-up uploads per run${matureStore ? ", mature store (fan-out directories made before the run)" : ", new store"}\n`,
  );
  console.log(
    table(
      ["run", "per s", "p50 ms", "p99 ms", "ratio", "CPU ms/op", "peak RSS MiB", "other load"],
      [
        [
          "bare Bun server: multipart+sha256+metadata+fsync",
          fmtRate(bareSummary.perSecond),
          fmtMs(bareSummary.p50Ms),
          fmtMs(bareSummary.p99Ms),
          "1.00",
          bareCpu.toFixed(2),
          fmtMiB(bareRss),
          bareOther.toFixed(2),
        ],
        [
          "in-process: sharp.metadata + sha256 + write+fsync",
          fmtRate(base.perSecond),
          fmtMs(base.p50Ms),
          fmtMs(base.p99Ms),
          (base.perSecond / bareSummary.perSecond).toFixed(2),
          baseCpu.toFixed(2),
          "-",
          baseOther.toFixed(2),
        ],
        ...uploads.map((u) => [
          `POST /api/admin/upload exif_policy=${u.policy}`,
          fmtRate(u.summary.perSecond),
          fmtMs(u.summary.p50Ms),
          fmtMs(u.summary.p99Ms),
          ratio(u).toFixed(2),
          u.serverCpuMs.toFixed(2),
          fmtMiB(u.peakRssBytes),
          u.otherCores.toFixed(2),
        ]),
      ],
    ),
  );
  console.log(
    (rounds > 1
      ? `\nratio: the median over ${rounds} slices of (slice rate / the bare server's rate in the slices right before and after it); slice ratios: ${uploads.map((u) => `${u.policy} ${u.sliceRatios.map((x) => x.toFixed(2)).join(" ")}`).join("; ")}.` +
        `\nslice rates per s (Kura | bare): ${uploads.map((u) => `${u.policy} ${u.sliceRates.map(fmtRate).join(" ")} | ${u.bareSliceRates.map(fmtRate).join(" ")}`).join("; ")}.` +
        `\nwhole runs: ${uploads.map((u) => `${u.policy} ${(u.summary.perSecond / u.barePerSecond).toFixed(2)} of the bare segments around it`).join(", ")}.`
      : "") +
      `\n${rounds > 1 ? "whole-run ratio" : "ratio"}: upload rate / the bare server's rate in the two segments around the run (bare segments per s: ${bares.map((b) => fmtRate(rate(b.run))).join(", ")}).` +
      `\nvs the in-process baseline (segments per s: ${baselines.map((b) => fmtRate(rate(b))).join(", ")}): ${uploads.map((u) => `${u.policy} ${vsInProcess(u).toFixed(2)}`).join(", ")}.` +
      `\nCPU ms/op: server process, all threads (Kura, bare server) / this process (in-process baseline); Kura / bare: ${uploads.map((u) => `${u.policy} ${(u.serverCpuMs / bareCpu).toFixed(2)}x`).join(", ")}. bench client CPU per upload: ${uploads.map((u) => u.clientCpuMs.toFixed(2)).join(" / ")} ms.` +
      `\nCPU ms/op by thread (JS thread / Bun pool: fs, fsync, sharp / other): bare ${fmtThreads(bareSplit)}; ${uploads.map((u) => `${u.policy} ${fmtThreads(u.threads)}`).join("; ")}.` +
      `\nminor page faults per upload (server process): bare ${bareSplit.faults.toFixed(0)}; ${uploads.map((u) => `${u.policy} ${u.threads.faults.toFixed(0)}`).join("; ")}.` +
      `\nSQLite commits per upload (write intent and reference, shared by group commit): ${uploads.map((u) => `${u.policy} ${u.commitsPerUpload.toFixed(2)}`).join("; ")}.` +
      `\nother load: average cores used by other processes during the run; well above 0 means the numbers are disturbed.`,
  );
  const worst = Math.min(...uploads.map(ratio));
  console.log(
    `\ntarget ratio >= ${TARGET_RATIO}: ${worst >= TARGET_RATIO ? "PASS" : "FAIL"} (worst ${worst.toFixed(2)}); total ${((performance.now() - started) / 1000).toFixed(1)} s`,
  );
  if (asJson) {
    const rows = uploads.map((u) => ({ ...u, ratio: ratio(u) }));
    console.log(
      JSON.stringify({
        date: new Date().toISOString(),
        n,
        concurrency,
        mature_store: matureStore,
        avg_kb: avgKb,
        bare: { ...bareSummary, cpu_ms: bareCpu, threads: bareSplit },
        baseline: { ...base, cpu_ms: baseCpu },
        uploads: rows,
      }),
    );
  }
}

await main();
