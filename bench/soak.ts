// Soak bench (not in CI): minutes of mixed load at saturation against one server, to catch
// 5xx under pressure, latency tails per request class, and memory that grows over time.
//
//   bun run bench/soak.ts                          # 5 minutes
//   bun run bench/soak.ts --duration 60 --concurrency 16 --json
//
// Mix per request: 80% reads (`/i/{id}` and `/o/{user}/{key}`, some with `?w=`), 10% uploads
// (token data plane, distinct bytes each), 10% admin lists. Closed loop: each worker sends its
// next request as soon as the previous one answered, so the server is saturated. Exit code 1 on
// any 5xx, any transport error, or an RSS growth of 10% or more after warm-up.
import { randomBytes } from "node:crypto";
import { flagValue, hasFlag, intFlag } from "./lib/args";
import { makeJpegs, type JpegSpec } from "./lib/jpegs";
import { counterValue } from "./lib/metrics";
import { machineSummary } from "./lib/machine";
import { multipartFile } from "./lib/multipart";
import { BenchServer } from "./lib/server";
import { adminSession } from "./lib/session";
import { fmtMs, percentile, table } from "./lib/stats";

const argv = process.argv.slice(2);
const durationS = intFlag(argv, "duration", 300);
const concurrency = intFlag(argv, "concurrency", 16);
const warmupS = intFlag(argv, "warmup", Math.max(10, Math.round(durationS / 5)));
const sampleS = intFlag(argv, "sample", 5);
const seedImages = intFlag(argv, "images", 60);
const json = hasFlag(argv, "json");
const entry = flagValue(argv, "entry");
if (warmupS >= durationS) throw new Error("--warmup 必须小于 --duration");

type Kind = "read" | "upload" | "admin";
const SMALL: JpegSpec = { width: 480, height: 360, noise: 20, quality: 80 };

interface ClassStats {
  latencies: number[];
  statuses: Map<number, number>;
  errors: number;
}
const stats: Record<Kind, ClassStats> = {
  read: { latencies: [], statuses: new Map(), errors: 0 },
  upload: { latencies: [], statuses: new Map(), errors: 0 },
  admin: { latencies: [], statuses: new Map(), errors: 0 },
};

const server = await BenchServer.start({ entry });
try {
  const admin = await adminSession(server);
  await admin.setConfig({ upload_rate_per_min: 1_000_000, max_concurrent_uploads: 1_000 });
  const issued = await admin.json<{ token: string }>("POST", "/api/admin/tokens", { name: "soak" }, 201);
  const bearer = { authorization: `Bearer ${issued.token}` };

  // Seed images to read, each reachable by id and by its /o/ alias.
  const pool = await makeJpegs(SMALL, seedImages);
  const readable: { id: string; alias: string }[] = [];
  const userId = (await admin.json<{ user: { id: string } }>("GET", "/api/admin/me")).user.id;
  for (const [i, bytes] of pool.entries()) {
    const m = multipartFile(bytes, `seed-${i}.jpg`, "image/jpeg", { object_key: `soak/seed-${i}.jpg` });
    const res = await fetch(server.url("/api/upload"), { method: "POST", headers: { ...bearer, "content-type": m.contentType }, body: m.body });
    if (res.status !== 200) throw new Error(`预置图片上传失败：HTTP ${res.status} ${await res.text()}`);
    const item = (await res.json()) as { id: string };
    readable.push({ id: item.id, alias: `/o/${encodeURIComponent(userId)}/soak/seed-${i}.jpg` });
  }

  // Each upload sends distinct bytes (a pool image plus a random trailer after its end marker),
  // so dedup never turns the upload into a no-op.
  let uploads = 0;
  const uploadBody = () => {
    const base = pool[uploads % pool.length]!;
    const bytes = new Uint8Array(base.length + 16);
    bytes.set(base);
    bytes.set(randomBytes(16), base.length);
    return multipartFile(bytes, `soak-${uploads}.jpg`, "image/jpeg", { object_key: `soak/run-${uploads++}.jpg` });
  };
  const adminPaths = ["/api/admin/images?limit=50", "/api/admin/channels", "/api/admin/audit?limit=50", "/api/admin/dashboard", "/api/admin/tokens"];

  const pick = <T>(list: readonly T[]) => list[Math.floor(Math.random() * list.length)]!;
  async function one(): Promise<void> {
    const r = Math.random();
    const kind: Kind = r < 0.8 ? "read" : r < 0.9 ? "upload" : "admin";
    const started = performance.now();
    let res: Response;
    try {
      if (kind === "read") {
        const img = pick(readable);
        const path = Math.random() < 0.5 ? `/i/${img.id}` : img.alias;
        const width = Math.random() < 0.25 ? "?w=320" : "";
        res = await fetch(server.url(path + width), { headers: { accept: "image/webp,image/*" } });
      } else if (kind === "upload") {
        const m = uploadBody();
        res = await fetch(server.url("/api/upload"), { method: "POST", headers: { ...bearer, "content-type": m.contentType }, body: m.body });
      } else {
        res = await fetch(server.url(pick(adminPaths)), { headers: { cookie: admin.cookie } });
      }
      await res.arrayBuffer();
    } catch {
      stats[kind].errors++;
      return;
    }
    const s = stats[kind];
    s.latencies.push(performance.now() - started);
    s.statuses.set(res.status, (s.statuses.get(res.status) ?? 0) + 1);
  }

  const samples: { atS: number; rssMiB: number; requests: number }[] = [];
  const total = () => stats.read.latencies.length + stats.upload.latencies.length + stats.admin.latencies.length;
  const t0 = performance.now();
  const deadline = t0 + durationS * 1000;
  const sampler = setInterval(() => {
    const atS = (performance.now() - t0) / 1000;
    const sample = { atS, rssMiB: server.rssBytes() / 1048576, requests: total() };
    samples.push(sample);
    if (!json) console.log(`t=${atS.toFixed(0).padStart(4)} s  RSS ${sample.rssMiB.toFixed(1).padStart(6)} MiB  requests ${sample.requests}`);
  }, sampleS * 1000);
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (performance.now() < deadline) await one();
    }),
  );
  clearInterval(sampler);
  const wallS = (performance.now() - t0) / 1000;

  // RSS after warm-up: the garbage collector makes RSS a saw-tooth, so compare the mean of the
  // first third of the samples after warm-up with the mean of the last third.
  const after = samples.filter((s) => s.atS >= warmupS);
  const third = Math.max(1, Math.floor(after.length / 3));
  const mean = (xs: typeof samples) => xs.reduce((n, s) => n + s.rssMiB, 0) / xs.length;
  const startRss = mean(after.slice(0, third));
  const endRss = mean(after.slice(-third));
  const growth = (endRss - startRss) / startRss;

  const fiveXx = (Object.values(stats) as ClassStats[]).reduce((n, s) => n + [...s.statuses].filter(([st]) => st >= 500).reduce((m, [, c]) => m + c, 0), 0);
  const transport = (Object.values(stats) as ClassStats[]).reduce((n, s) => n + s.errors, 0);
  const rows = (Object.keys(stats) as Kind[]).map((k) => {
    const s = stats[k];
    const statusText = [...s.statuses]
      .sort((a, b) => a[0] - b[0])
      .map(([st, c]) => `${st}×${c}`)
      .join(" ");
    return [
      k,
      String(s.latencies.length),
      (s.latencies.length / wallS).toFixed(1),
      fmtMs(percentile(s.latencies, 50)),
      fmtMs(percentile(s.latencies, 99)),
      statusText || "-",
    ];
  });
  const passed = fiveXx === 0 && transport === 0 && growth < 0.1;
  // Delivery threads (README "Delivery threads"): in `auto` they start once reads are busy.
  const deliveryThreads = await counterValue(server, "kura_delivery_threads");
  const threadAnswers = await counterValue(server, "kura_delivery_thread_answers_total");
  const commitUnits = await counterValue(server, "kura_db_group_commit_units_total");
  const commits = await counterValue(server, "kura_db_group_commits_total");
  const copies = await counterValue(server, "kura_db_wal_checkpoints_total", { kind: "copy" });
  const restarts = await counterValue(server, "kura_db_wal_checkpoints_total", { kind: "restart" });

  console.log(`\n${machineSummary()}`);
  console.log(
    `soak: ${wallS.toFixed(0)} s, concurrency ${concurrency}, warm-up ${warmupS} s, ${readable.length} seeded images, ${uploads} uploads during the run`,
  );
  console.log(table(["class", "requests", "per s", "p50 ms", "p99 ms", "statuses"], rows));
  console.log(`5xx: ${fiveXx}   transport errors: ${transport}`);
  console.log(
    `delivery threads (KURA_DELIVERY_THREADS=${process.env.KURA_DELIVERY_THREADS ?? "auto"}): ${deliveryThreads} running, ${threadAnswers} /i/ answers from their memory`,
  );
  console.log(
    `database: ${commitUnits} upload write units in ${commits} commits (${(commitUnits / Math.max(commits, 1)).toFixed(2)} per commit); WAL checkpoints ${copies} by the worker, ${restarts} WAL restarts`,
  );
  console.log(
    `RSS after warm-up (mean of first third → last third of the samples): ${startRss.toFixed(1)} MiB → ${endRss.toFixed(1)} MiB (${(growth * 100).toFixed(1)}%, limit < 10%); peak ${(server.peakRssBytes() / 1048576).toFixed(0)} MiB`,
  );
  if (fiveXx > 0) {
    // What the server said about them: its warnings and errors, last first.
    const complaints = server.logs.split("\n").filter((line) => /level=(WARN|ERROR)/.test(line));
    console.log(`server warnings and errors (${complaints.length}, last 10):\n${complaints.slice(-10).join("\n")}`);
  }
  console.log(passed ? "PASS" : "FAIL");
  if (json) {
    console.log(
      JSON.stringify({
        durationS: wallS,
        concurrency,
        warmupS,
        fiveXx,
        transport,
        startRss,
        endRss,
        growth,
        samples,
        classes: Object.fromEntries(
          rows.map((r) => [r[0], { requests: Number(r[1]), perSecond: Number(r[2]), p50Ms: Number(r[3]), p99Ms: Number(r[4]), statuses: r[5] }]),
        ),
      }),
    );
  }
  process.exitCode = passed ? 0 : 1;
} finally {
  await server.dispose();
}
