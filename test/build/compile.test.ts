// End-to-end check of the single-file build: `bun run build.ts` -> dist/kura, then run the
// executable ALONE from an empty directory outside the repo, with a scrubbed environment,
// so neither node_modules nor source files can be reached by any lookup.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { copyFileSync, existsSync, mkdtempSync, readdirSync, rmSync, statSync, truncateSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pkg from "../../package.json" with { type: "json" };
import sharpPkg from "../../node_modules/sharp/package.json" with { type: "json" };
import { freePort } from "../helpers/ports";

const ROOT = join(import.meta.dir, "..", "..");
const BUILD_TIMEOUT_MS = 240_000;

let work: string; // everything below lives in the OS temp dir, never under the repo
let binDir: string;
let home: string;

function scrubbedEnv(extra: Record<string, string> = {}): Record<string, string> {
  return { PATH: "/usr/bin:/bin", HOME: home, ...extra };
}

async function runKura(args: string[], env = scrubbedEnv()) {
  const proc = Bun.spawn([join(binDir, "kura"), ...args], { cwd: binDir, env, stdout: "pipe", stderr: "pipe" });
  const [stdout, stderr, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
  return { stdout, stderr, code };
}

function parseSelftest(stdout: string) {
  const line = stdout.trim().split("\n").pop() ?? "";
  return JSON.parse(line) as { ok: boolean; sharp: string; vips: string; jpeg: { bytes: number }; webp: { bytes: number } };
}

function nativeCacheDirs(): string[] {
  const base = join(home, ".cache", "kura");
  return existsSync(base) ? readdirSync(base).filter((d) => d.startsWith("native-sharp-")) : [];
}

beforeAll(async () => {
  const build = Bun.spawn([process.execPath, "run", "build.ts"], { cwd: ROOT, stdout: "pipe", stderr: "pipe" });
  const [out, err, code] = await Promise.all([new Response(build.stdout).text(), new Response(build.stderr).text(), build.exited]);
  if (code !== 0) throw new Error(`build.ts failed (${code}):\n${out}\n${err}`);
  work = mkdtempSync(join(tmpdir(), "kura-compile-"));
  binDir = join(work, "bin");
  home = join(work, "home");
  for (const d of [binDir, home]) Bun.spawnSync(["mkdir", "-p", d]);
  copyFileSync(join(ROOT, "dist", "kura"), join(binDir, "kura"));
  Bun.spawnSync(["chmod", "755", join(binDir, "kura")]);
  expect(readdirSync(binDir)).toEqual(["kura"]);
  expect(binDir.startsWith(ROOT)).toBe(false);
}, BUILD_TIMEOUT_MS);

afterAll(() => {
  if (work) rmSync(work, { recursive: true, force: true });
});

describe("compiled executable (dist/kura)", () => {
  test("version prints the package version", async () => {
    const r = await runKura(["version"]);
    expect(r.code).toBe(0);
    expect(r.stdout).toContain(pkg.version);
  });

  test("selftest does real sharp work with the embedded addon + libvips", async () => {
    const r = await runKura(["selftest"]);
    expect(r.code).toBe(0);
    const report = parseSelftest(r.stdout);
    expect(report.ok).toBe(true);
    expect(report.sharp).toBe(sharpPkg.version);
    expect(report.vips).toMatch(/^\d+\.\d+\.\d+/);
    expect(report.jpeg.bytes).toBeGreaterThan(0);
    expect(report.webp.bytes).toBeGreaterThan(0);
    // The natives were unpacked once into the (fresh) per-user cache, laid out for the RPATH.
    const dirs = nativeCacheDirs();
    expect(dirs.length).toBe(1);
    const libdir = join(home, ".cache", "kura", dirs[0]!);
    expect(readdirSync(join(libdir, "sharp-linux-x64", "lib")).some((f) => f.endsWith(".node"))).toBe(true);
    expect(readdirSync(join(libdir, "sharp-libvips-linux-x64", "lib")).some((f) => f.startsWith("libvips-cpp.so"))).toBe(true);
  });

  test("two processes extracting into an empty cache at once both succeed", async () => {
    const raceHome = join(work, "race-home");
    Bun.spawnSync(["mkdir", "-p", raceHome]);
    const env = { PATH: "/usr/bin:/bin", HOME: raceHome };
    const results = await Promise.all([1, 2, 3, 4].map(() => runKura(["selftest"], env)));
    for (const r of results) {
      expect(r.code).toBe(0);
      expect(parseSelftest(r.stdout).ok).toBe(true);
    }
    // One published copy, no leftover temp dirs from the losers of the rename race.
    expect(readdirSync(join(raceHome, ".cache", "kura"))).toHaveLength(1);
  });

  test("a damaged cached libvips is detected and re-extracted", async () => {
    const dir = join(home, ".cache", "kura", nativeCacheDirs()[0]!, "sharp-libvips-linux-x64", "lib");
    const lib = join(dir, readdirSync(dir)[0]!);
    const size = statSync(lib).size;
    truncateSync(lib, 1000);
    const r = await runKura(["selftest"]);
    expect(r.code).toBe(0);
    expect(parseSelftest(r.stdout).ok).toBe(true);
    expect(statSync(lib).size).toBe(size);
  });

  test("cache folders of other versions are removed once this build's copy is loaded", async () => {
    const upgradeHome = join(work, "upgrade-home");
    const cache = join(upgradeHome, ".cache", "kura");
    const stale = join(cache, "native-sharp-0.0.1-linux-x64-0123456789ab", "sharp-linux-x64", "lib");
    Bun.spawnSync(["mkdir", "-p", stale, join(cache, ".tmp-1-inflight")]);
    writeFileSync(join(stale, "old.node"), "old build");
    writeFileSync(join(cache, "notes.txt"), "not ours");
    const r = await runKura(["selftest"], { PATH: "/usr/bin:/bin", HOME: upgradeHome });
    expect(r.code).toBe(0);
    expect(parseSelftest(r.stdout).ok).toBe(true);
    const left = readdirSync(cache).sort();
    expect(left.filter((d) => d.startsWith("native-sharp-"))).toHaveLength(1);
    expect(left).not.toContain("native-sharp-0.0.1-linux-x64-0123456789ab");
    expect(left).toContain("notes.txt");
    expect(left).toContain(".tmp-1-inflight");
  });

  test("without a usable home it falls back to a private per-uid dir under TMPDIR", async () => {
    const tmp = join(work, "tmp");
    Bun.spawnSync(["mkdir", "-p", tmp]);
    // HOME=/dev/null: ~/.cache cannot be created (ENOTDIR), like a service user without a home.
    const r = await runKura(["selftest"], { PATH: "/usr/bin:/bin", HOME: "/dev/null", TMPDIR: tmp });
    expect(r.code).toBe(0);
    expect(parseSelftest(r.stdout).ok).toBe(true);
    const [fallback] = readdirSync(tmp);
    expect(fallback).toMatch(/^kura-native-\d+$/);
    expect(statSync(join(tmp, fallback!)).mode & 0o077).toBe(0);
    expect(readdirSync(join(tmp, fallback!))[0]).toStartWith("native-sharp-");
  });

  test("serve answers /healthz (also through its delivery thread) and exits cleanly on SIGTERM", async () => {
    const port = freePort();
    const dataDir = join(work, "data");
    const proc = Bun.spawn([join(binDir, "kura"), "serve"], {
      cwd: binDir,
      // The delivery thread is a second entry point of the build (build.ts): it must start from inside the binary.
      env: scrubbedEnv({ KURA_LISTEN: `127.0.0.1:${port}`, KURA_DATA_DIR: dataDir, KURA_DELIVERY_THREADS: "1" }),
      stdout: "pipe",
      stderr: "pipe",
    });
    const stderr = new Response(proc.stderr).text();
    try {
      let body = "";
      const deadline = Date.now() + 20_000;
      while (Date.now() < deadline && proc.exitCode === null) {
        try {
          const res = await fetch(`http://127.0.0.1:${port}/healthz`);
          body = await res.text();
          if (res.status === 200 && body.trim() === "ok") break;
        } catch {
          // not listening yet
        }
        await Bun.sleep(100);
      }
      expect(body.trim()).toBe("ok");
      expect(existsSync(dataDir)).toBe(true);
      // The embedded OpenAPI document and console page are served from inside the binary.
      const spec = await (await fetch(`http://127.0.0.1:${port}/api/openapi.yaml`)).text();
      expect(spec).toContain("openapi: 3.1.0");
      const consolePage = await (await fetch(`http://127.0.0.1:${port}/`)).text();
      expect(consolePage).toContain('id="app"');
      expect(/<script type="module">[\s\S]{1000,}<\/script>/.test(consolePage)).toBe(true);
      // The API docs renderer is embedded too (no CDN): byte-identical to the installed build.
      const docsScript = await fetch(`http://127.0.0.1:${port}/api/docs/standalone.js`);
      expect(docsScript.status).toBe(200);
      const installed = Bun.file(join(import.meta.dir, "..", "..", "node_modules", "@scalar", "api-reference", "dist", "browser", "standalone.js"));
      expect((await docsScript.arrayBuffer()).byteLength).toBe(installed.size);
      // The thread starts beside the main listener, which answers meanwhile: on a loaded machine it
      // may come up after the first answers, so its gauge is waited for, not read once.
      let metrics = "";
      const threadDeadline = Date.now() + 20_000;
      while (Date.now() < threadDeadline && !metrics.includes("\nkura_delivery_threads 1\n")) {
        metrics = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
        if (!metrics.includes("\nkura_delivery_threads 1\n")) await Bun.sleep(100);
      }
      expect(metrics).toContain("\nkura_delivery_threads 1\n");
      for (let i = 0; i < 16; i++) expect((await fetch(`http://127.0.0.1:${port}/healthz`, { headers: { connection: "close" } })).status).toBe(200);
      proc.kill("SIGTERM");
      const code = await proc.exited;
      if (code !== 0) console.error(await stderr);
      expect(proc.signalCode).toBeNull();
      expect(code).toBe(0);
      expect(await stderr).toContain("投递线程已启动");
    } finally {
      if (proc.exitCode === null) proc.kill("SIGKILL");
    }
  }, 40_000);

  test("running from source loads sharp from node_modules without extracting", async () => {
    const srcHome = join(work, "source-home");
    Bun.spawnSync(["mkdir", "-p", srcHome]);
    const r = Bun.spawnSync([process.execPath, "run", join(ROOT, "src", "main.ts"), "selftest"], {
      cwd: ROOT,
      env: { PATH: process.env.PATH ?? "/usr/bin:/bin", HOME: srcHome },
    });
    expect(r.exitCode).toBe(0);
    expect(parseSelftest(r.stdout.toString()).ok).toBe(true);
    expect(existsSync(join(srcHome, ".cache", "kura"))).toBe(false);
  });
});
