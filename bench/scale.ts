// Scale bench (issue 10): `seed` builds a large library in a data dir; `measure` starts Kura
// on it and times the admin operations and background rounds that grow with the library,
// each with a concurrent /healthz + /i/ probe every 5 ms (the stall) and the server's RSS.
//
//   bun run bench/scale.ts seed --data-dir /tmp/kura-1m --images 1000000
//   bun run bench/scale.ts measure --data-dir /tmp/kura-1m
import { Database } from "bun:sqlite";
import { existsSync } from "node:fs";
import { join, resolve } from "node:path";
import { readBootstrap } from "../src/config/bootstrap";
import { createAppContext } from "../src/app-context";
import { openDataDir } from "../src/boot";
import { scanRound } from "../src/images/dedup";
import { sweepRound } from "../src/images/sweep";
import { flagValue, intFlag } from "./lib/args";
import { machineSummary } from "./lib/machine";
import { readProcStatusKb } from "./lib/server";
import { makeJpeg, PHOTO_200KB } from "./lib/jpegs";
import { REAL_BLOBS, SCALE_ADMIN_PASSWORD, SCALE_USER_PASSWORD, seedLibrary } from "./lib/scale-seed";
import { RssSampler, StallProbe } from "./lib/stall-probe";
import { fmtMiB, table } from "./lib/stats";

const ROOT = resolve(import.meta.dir, "..");
const READY = /msg="Kura 启动完成".*listen=(\S+)/;

async function startServer(dataDir: string) {
  const spawned = performance.now();
  const proc = Bun.spawn(["bun", "run", join(ROOT, "src/main.ts"), "serve"], {
    cwd: dataDir,
    env: { ...process.env, KURA_LISTEN: "127.0.0.1:0", KURA_DATA_DIR: dataDir },
    stdout: "pipe",
    stderr: "pipe",
  });
  let logs = "";
  void (async () => {
    const decoder = new TextDecoder();
    for await (const chunk of proc.stderr as ReadableStream<Uint8Array>) logs += decoder.decode(chunk, { stream: true });
  })();
  void (async () => {
    const decoder = new TextDecoder();
    for await (const chunk of proc.stdout as ReadableStream<Uint8Array>) logs += decoder.decode(chunk, { stream: true });
  })();
  for (;;) {
    const m = logs.match(READY);
    if (m) {
      const base = `http://${m[1]}`;
      // Startup is measured to the first healthy answer, as a load balancer sees it.
      while ((await fetch(`${base}/healthz`).catch(() => undefined))?.status !== 200) await Bun.sleep(5);
      return { proc, base, startupMs: performance.now() - spawned, logs: () => logs };
    }
    if (proc.exitCode !== null) throw new Error(`服务未能启动：\n${logs}`);
    await Bun.sleep(5);
  }
}

async function login(base: string, name: string, password: string) {
  const res = await fetch(`${base}/api/admin/auth/login`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ name, password }),
  });
  if (res.status !== 200) throw new Error(`登录失败：${name} HTTP ${res.status}`);
  const csrf = ((await res.json()) as { csrf_token: string }).csrf_token;
  return { cookie: (res.headers.get("set-cookie") ?? "").split(";")[0]!, "x-csrf-token": csrf };
}

async function measure(dataDir: string) {
  const server = await startServer(dataDir);
  const rss = () => readProcStatusKb(server.proc.pid, "VmRSS") * 1024;
  const rows: string[][] = [];
  const startupMs = server.startupMs;
  try {
    const admin = await login(server.base, "admin", SCALE_ADMIN_PASSWORD);
    const user = await login(server.base, "user01", SCALE_USER_PASSWORD);
    const firstPage = (await (await fetch(`${server.base}/api/admin/images?page_size=100`, { headers: admin })).json()) as {
      items: { id: string; size: number }[];
      total: number;
      next_cursor: string;
    };
    // The /i/ probe asks for an image whose bytes exist (the seed writes a few real blobs).
    const realId = findRealImage(dataDir);
    // It must answer 200 with its bytes: an error answer (a seed whose bytes fail the SHA-256
    // check answers 503) would time the error path, not delivery.
    const probeAnswer = await fetch(`${server.base}/i/${realId}`);
    const probeBytes = (await probeAnswer.arrayBuffer()).byteLength;
    if (probeAnswer.status !== 200 || probeBytes === 0)
      throw new Error(`探测图片 /i/${realId} 应返回 200 和图片数据，实际 HTTP ${probeAnswer.status}、${probeBytes} 字节；请用当前的 seed 重新生成数据目录`);
    const probe = new StallProbe([`${server.base}/healthz`, `${server.base}/i/${realId}`]);
    console.error(`  idle RSS ${fmtMiB(rss())} MiB`);

    const op = async (label: string, run: () => Promise<unknown>) => {
      const sampler = new RssSampler(rss);
      const before = rss();
      sampler.start();
      probe.start();
      const t0 = performance.now();
      await run();
      const ms = performance.now() - t0;
      const [healthz, image] = await probe.stop();
      const peak = sampler.stop();
      rows.push([label, ms.toFixed(1), healthz!.toFixed(1), image!.toFixed(1), `${fmtMiB(peak - before)}`]);
      console.error(`  ${label}: ${ms.toFixed(1)} ms, /healthz ${healthz!.toFixed(1)} ms, /i/ ${image!.toFixed(1)} ms`);
    };
    const get = (path: string, headers: Record<string, string>) => async () => {
      const res = await fetch(server.base + path, { headers });
      if (res.status !== 200) throw new Error(`${path}: HTTP ${res.status}`);
      // Read in chunks and drop them: the bench must not hold a big body either.
      for await (const _ of res.body!) void _;
    };

    // The probe's own worst answer with nothing running: the noise floor of a shared machine.
    await op("idle 3 s (probe noise floor)", () => Bun.sleep(3000));
    await op("GET /metrics (first scrape)", get("/metrics", {}));
    await op("GET /api/admin/export (streamed)", get("/api/admin/export", admin));
    await op("GET /api/admin/users", get("/api/admin/users", admin));
    await op("POST /api/admin/backups (VACUUM INTO in a worker)", async () => {
      const res = await fetch(`${server.base}/api/admin/backups`, { method: "POST", headers: admin });
      if (res.status >= 300) throw new Error(`backup: HTTP ${res.status} ${await res.text()}`);
    });
    await op("GET /api/admin/dashboard (admin)", get("/api/admin/dashboard", admin));
    await op("GET /api/admin/dashboard (user)", get("/api/admin/dashboard", user));
    const jpeg = await makeJpeg({ ...PHOTO_200KB, width: 640, height: 480 }, Date.now() % 100_000);
    await op("upload by a user with a quota", async () => {
      const form = new FormData();
      form.append("file", new Blob([new Uint8Array(jpeg)], { type: "image/jpeg" }), "scale.jpg");
      const res = await fetch(`${server.base}/api/admin/upload`, { method: "POST", headers: user, body: form });
      if (res.status >= 300) throw new Error(`upload: HTTP ${res.status} ${await res.text()}`);
    });
    await op("image list page 1", get("/api/admin/images?page=1", admin));
    await op("image list page 5000 (OFFSET)", get("/api/admin/images?page=5000", admin));
    await op("image list next page by cursor", get(`/api/admin/images?page_size=100&cursor=${encodeURIComponent(firstPage.next_cursor)}`, admin));
    await op("image list search=holiday_12 (FTS5 trigram)", get("/api/admin/images?search=holiday_12", admin));
    await op("image list search=I (short term, walked in steps)", get("/api/admin/images?search=I", admin));
    await op("image list search=zz (short term, no match: the whole walk)", get("/api/admin/images?search=zz", admin));
    await op("image list search=IMG (a tenth of the names)", get("/api/admin/images?search=IMG", admin));
    await op("cleanup list page 1", get("/api/admin/cleanup", admin));
    // A cold_cleanup_days save re-judges every image in the background: timed from the save until
    // the cleanup list's count (read from the file, not through the server) has not moved for 3 s.
    const listed = countOnDisk(dataDir, "SELECT listed AS n FROM cleanup_counts");
    for (const days of [1, 0]) {
      await op(`PUT cold_cleanup_days=${days} and the re-judge that follows (to 3 s without change)`, async () => {
        const res = await fetch(`${server.base}/api/admin/config`, {
          method: "PUT",
          headers: { ...admin, "content-type": "application/json" },
          body: JSON.stringify({ cold_cleanup_days: days }),
        });
        if (res.status !== 200) throw new Error(`config: HTTP ${res.status} ${await res.text()}`);
        await settled(listed);
      });
      console.error(`    cleanup list now ${listed()} images`);
    }
    const hundred = firstPage.items.map((i) => i.id).slice(0, 100);
    await op("batch delete of 100 images", async () => {
      const res = await fetch(`${server.base}/api/admin/images/batch-delete`, {
        method: "POST",
        headers: { ...admin, "content-type": "application/json" },
        body: JSON.stringify({ ids: hundred }),
      });
      const body = (await res.json()) as { deleted: number };
      if (res.status !== 200 || body.deleted !== hundred.length) throw new Error(`batch delete: HTTP ${res.status} ${JSON.stringify(body)}`);
    });
    console.log(`\n库规模：${firstPage.total} 张图片；${machineSummary()}；启动到 /healthz：${server.startupMs.toFixed(0)} ms\n`);
  } finally {
    server.proc.kill("SIGTERM");
    await server.proc.exited;
  }
  // Background rounds, timed in-process on the stopped server's data (they have no HTTP trigger).
  const boot = readBootstrap({ KURA_DATA_DIR: dataDir, KURA_LISTEN: "127.0.0.1:0" });
  const quiet = { info: () => {}, warn: () => {}, error: () => {} };
  const { db, key } = openDataDir(boot, quiet);
  const app = await createAppContext(boot, db, key, quiet, () => {});
  await scanRound(app); // takes in the blob the upload above added
  for (const [label, run] of [
    ["dedup round, nothing new (in-process, median of 5)", () => scanRound(app)],
    ["cleanup sweep round (in-process, median of 5)", () => sweepRound(app)],
  ] as const) {
    const times: number[] = [];
    for (let i = 0; i < 5; i++) {
      const t0 = performance.now();
      await run();
      times.push(performance.now() - t0);
    }
    const ms = times.sort((a, b) => a - b)[2]!;
    rows.push([label, ms.toFixed(1), `≤ ${ms.toFixed(1)}`, "—", "—"]);
  }
  db.close();
  rows.push(["startup to /healthz", startupMs.toFixed(0), "—", "—", "—"]);
  console.log(table(["操作", "耗时 ms", "/healthz 最长 ms", "/i/ 最长 ms", "RSS 峰值增量 MiB"], rows));
}

/** A count read from the data dir's database on a read-only connection of its own (the server's loop is not involved). */
function countOnDisk(dataDir: string, sql: string): () => number {
  const db = new Database(join(dataDir, "kura.db"), { readonly: true });
  const query = db.query<{ n: number }, []>(sql);
  return () => query.get()!.n;
}

/** Resolves once `read()` has returned the same value for 3 s (polled every 100 ms; a server stall of a second must not end the wait). */
async function settled(read: () => number): Promise<void> {
  let value = read();
  let since = performance.now();
  while (performance.now() - since < 3000) {
    await Bun.sleep(100);
    const now = read();
    if (now !== value) {
      value = now;
      since = performance.now();
    }
  }
}

/** An image whose blob got real bytes from the seed (the oldest blobs), read from the database file. */
function findRealImage(dataDir: string): string {
  const db = new Database(join(dataDir, "kura.db"), { readonly: true });
  try {
    const row = db.query<{ id: string }, [number]>("SELECT id FROM images WHERE blob_id <= ? ORDER BY blob_id LIMIT 1").get(REAL_BLOBS);
    if (!row) throw new Error("没有找到带真实字节的图片");
    return row.id;
  } finally {
    db.close();
  }
}

const [command, ...argv] = process.argv.slice(2);
const dataDir = flagValue(argv, "data-dir");
if (!dataDir || (command !== "seed" && command !== "measure")) {
  console.error("用法：bun run bench/scale.ts seed --data-dir D --images N | measure --data-dir D");
  process.exit(2);
}
if (command === "seed") {
  if (existsSync(join(dataDir, "kura.db"))) {
    console.error(`${dataDir} 已有数据库，请换一个空目录`);
    process.exit(2);
  }
  const result = await seedLibrary(dataDir, intFlag(argv, "images", 100_000), (msg) => console.error(`  ${msg}`));
  console.log(
    `已生成：${result.images} 张图片、${result.blobs} 个 blob、${result.users} 个用户，用时 ${result.seconds.toFixed(1)} s（${machineSummary()}）。管理员 admin / ${SCALE_ADMIN_PASSWORD}`,
  );
} else {
  await measure(dataDir);
}
