// Huge sources: a 7360x4912 JPEG (~14.5 MB, a full-frame camera photo) turned into ~500 px
// JPEGs, every request a width not rendered before (cold), `--concurrency` requests in flight —
// the shape of imgproxy's published benchmark. The reference is sharp in this process doing the
// same resize + JPEG encode from the same stored file at the same concurrency, measured in the
// same run, before and after Kura so machine drift hits both sides.
//
//   bun run bench/huge.ts [--requests 48] [--concurrency 4] [--entry other/src/main.ts] [--json]
//
// Targets (issue "memory budget"): rate >= 0.9 x sharp, server peak RSS < 300 MiB, idle < 100 MiB.
import sharp from "sharp";
import { flagValue, hasFlag, intFlag } from "./lib/args";
import { BackgroundLoad, machineSummary, ownCpuMs } from "./lib/machine";
import { multipartFile } from "./lib/multipart";
import { BenchServer, readProcStatusKb } from "./lib/server";
import { adminSession, type BenchSession } from "./lib/session";
import { fmtMs, fmtRate, percentile, runPool, table } from "./lib/stats";
import { makeHugeJpeg, withComment } from "./lib/huge-jpeg";

const TARGET_RATIO = 0.9;
const TARGET_PEAK_MIB = 300;
const TARGET_IDLE_MIB = 100;
/** process_widths holds at most 64 entries; each stored copy gets every width once. */
const WIDTHS = Array.from({ length: 64 }, (_, i) => 480 + i);
const JPEG_QUALITY = 82; // Kura's default process_quality_jpeg

const argv = process.argv.slice(2);
const requests = intFlag(argv, "requests", 48);
const concurrency = intFlag(argv, "concurrency", 4);
const entry = flagValue(argv, "entry");
const asJson = hasFlag(argv, "json");
const log = (msg: string) => console.error(msg);

interface Job {
  id: string;
  width: number;
}

/** Enough distinct copies (a JPEG comment makes each its own blob) for `requests` cold (copy, width) pairs. */
async function uploadCopies(admin: BenchSession, jpeg: Uint8Array, count: number): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 0; i < count; i++) {
    const b = multipartFile(withComment(jpeg, `huge-bench copy ${i}`), `huge-${i}.jpg`, "image/jpeg", { exif_policy: "passthrough" });
    const res = await fetch(admin.server.url("/api/admin/upload"), {
      method: "POST",
      headers: { ...admin.authHeaders(), "content-type": b.contentType },
      body: b.body,
    });
    if (res.status !== 200) throw new Error(`上传失败：HTTP ${res.status}：${await res.text()}`);
    ids.push(((await res.json()) as { id: string }).id);
  }
  return ids;
}

function jobsFor(ids: readonly string[]): Job[] {
  const jobs: Job[] = [];
  for (let i = 0; i < requests; i++) jobs.push({ id: ids[Math.floor(i / WIDTHS.length)]!, width: WIDTHS[i % WIDTHS.length]! });
  return jobs;
}

async function timedPool<T>(items: readonly T[], task: (item: T) => Promise<void>) {
  const latencies: number[] = [];
  const t0 = performance.now();
  await runPool(items, concurrency, async (item) => {
    const s = performance.now();
    await task(item);
    latencies.push(performance.now() - s);
  });
  const wallMs = performance.now() - t0;
  return { perSecond: (items.length * 1000) / wallMs, p50: percentile(latencies, 50), p99: percentile(latencies, 99) };
}

/** sharp in this process: read the stored file, resize, encode — what a minimal server would do. */
async function sharpReference(files: readonly string[]) {
  const pairs = Array.from({ length: requests }, (_, i) => ({ path: files[Math.floor(i / WIDTHS.length)]!, width: WIDTHS[i % WIDTHS.length]! }));
  const c0 = ownCpuMs();
  const load = new BackgroundLoad(ownCpuMs);
  const r = await timedPool(pairs, async ({ path, width }) => {
    await sharp(path).resize({ width, withoutEnlargement: true }).jpeg({ quality: JPEG_QUALITY, mozjpeg: true }).toBuffer();
  });
  return { ...r, cpuMsPerOp: (ownCpuMs() - c0) / requests, otherLoad: load.cores() };
}

async function main() {
  log(machineSummary());
  log("生成 7360x4912 测试 JPEG …");
  const jpeg = await makeHugeJpeg();
  log(`源图 ${(jpeg.byteLength / 1048576).toFixed(1)} MiB`);
  const server = await BenchServer.start({ entry });
  try {
    await Bun.sleep(1500);
    const idleKb = readProcStatusKb(server.proc.pid, "VmRSS");
    const admin = await adminSession(server);
    await admin.setConfig({ process_widths: WIDTHS, max_upload_mb: 64, upload_rate_per_min: 100000 });
    const copies = Math.ceil(requests / WIDTHS.length);
    const ids = await uploadCopies(admin, jpeg, copies);
    const files = await storedFiles(server, copies);
    const jobs = jobsFor(ids);

    log("sharp 参考（之前）…");
    await sharp(files[0]!).resize({ width: 400 }).jpeg().toBuffer(); // libvips warm-up
    const before = await sharpReference(files);
    log(`Kura：${requests} 个冷变体，并发 ${concurrency} …`);
    const cpu0 = server.cpuMs();
    const kuraLoad = new BackgroundLoad(() => server.cpuMs() + ownCpuMs());
    const kura = await timedPool(jobs, async ({ id, width }) => {
      const res = await fetch(server.url(`/i/${id}?w=${width}&format=jpeg`));
      const body = await res.arrayBuffer();
      if (res.status !== 200 || res.headers.get("content-type") !== "image/jpeg" || res.headers.get("cache-control") === "no-store") {
        throw new Error(`冷变体失败：w=${width} HTTP ${res.status} ${res.headers.get("content-type")} ${res.headers.get("cache-control")}`);
      }
      if (body.byteLength === 0) throw new Error("空响应");
    });
    const kuraCpu = (server.cpuMs() - cpu0) / requests;
    const kuraOtherLoad = kuraLoad.cores();
    log("sharp 参考（之后）…");
    const after = await sharpReference(files);
    const peakKb = readProcStatusKb(server.proc.pid, "VmHWM");
    const refRate = (before.perSecond + after.perSecond) / 2;
    const ratio = kura.perSecond / refRate;
    // Steadier than rates on a shared machine: sharp's CPU per render / Kura's (server, all threads).
    const cpuRatio = (before.cpuMsPerOp + after.cpuMsPerOp) / 2 / kuraCpu;
    const idleMiB = idleKb / 1024;
    const peakMiB = peakKb / 1024;
    console.log(
      table(
        ["run", "per s", "p50 ms", "p99 ms", "ratio", "CPU ms/op", "peak RSS MiB", "other load"],
        [
          [
            "sharp in-process (before)",
            fmtRate(before.perSecond),
            fmtMs(before.p50),
            fmtMs(before.p99),
            "-",
            before.cpuMsPerOp.toFixed(0),
            "-",
            before.otherLoad.toFixed(2),
          ],
          [
            `Kura GET /i/{id}?w=<new>&format=jpeg`,
            fmtRate(kura.perSecond),
            fmtMs(kura.p50),
            fmtMs(kura.p99),
            ratio.toFixed(2),
            kuraCpu.toFixed(0),
            peakMiB.toFixed(0),
            kuraOtherLoad.toFixed(2),
          ],
          [
            "sharp in-process (after)",
            fmtRate(after.perSecond),
            fmtMs(after.p50),
            fmtMs(after.p99),
            "-",
            after.cpuMsPerOp.toFixed(0),
            "-",
            after.otherLoad.toFixed(2),
          ],
        ],
      ),
    );
    const pass = ratio >= TARGET_RATIO && peakMiB < TARGET_PEAK_MIB && idleMiB < TARGET_IDLE_MIB;
    console.log(
      `\nidle RSS ${idleMiB.toFixed(0)} MiB (target < ${TARGET_IDLE_MIB}); peak RSS ${peakMiB.toFixed(0)} MiB (target < ${TARGET_PEAK_MIB}); ` +
        `ratio ${ratio.toFixed(2)} (target >= ${TARGET_RATIO}; CPU-per-render ratio ${cpuRatio.toFixed(2)}): ${pass ? "PASS" : "FAIL"}` +
        (Math.max(before.otherLoad, kuraOtherLoad, after.otherLoad) > 0.2
          ? "\nother load well above 0: the machine was shared, rates are not comparable — rerun on a quiet machine"
          : ""),
    );
    if (asJson) console.log(JSON.stringify({ requests, concurrency, idleMiB, peakMiB, ratio, cpuRatio, kura, before, after }));
  } finally {
    await server.dispose();
  }
}

/** The stored originals on the default local channel (the reference reads the same files). */
async function storedFiles(server: BenchServer, count: number): Promise<string[]> {
  const glob = new Bun.Glob("storage/**/*.jpg");
  const out: string[] = [];
  for await (const f of glob.scan({ cwd: server.dataDir, absolute: true })) out.push(f);
  if (out.length < count) throw new Error(`本地渠道中只找到 ${out.length} 个原图，期望 ${count}`);
  return out.slice(0, count);
}

await main();
