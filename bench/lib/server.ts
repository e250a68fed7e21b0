// A real Kura process for benchmarks: same spawning approach as test/helpers/server.ts,
// copied here so bench scripts do not pull in bun:test or the OpenAPI validator.
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { oneThreadCpuMs, processCpuMs } from "./machine";

const ROOT = resolve(import.meta.dir, "../..");
const READY = /msg="Kura 启动完成".*listen=(\S+)/;

export interface BenchServerOptions {
  /** Entry point to run (default: this checkout's src/main.ts); lets a bench compare two trees. */
  entry?: string;
  /** Flags for the bun runtime itself, e.g. ["--cpu-prof-md", "--cpu-prof-dir=/tmp/prof"]. */
  bunArgs?: string[];
  /** Extra environment for the child (undefined removes a variable). */
  env?: Record<string, string | undefined>;
  startTimeoutMs?: number;
  /** The log line that says the process listens, with the address as group 1 (default: Kura's). */
  ready?: RegExp;
}

/** Kura on a random loopback port with a temporary data directory it deletes on dispose. */
export class BenchServer {
  base = "";
  logs = "";

  private constructor(
    readonly proc: ReturnType<typeof Bun.spawn>,
    readonly dataDir: string,
  ) {}

  static async start(opts: BenchServerOptions = {}): Promise<BenchServer> {
    const dataDir = mkdtempSync(join(tmpdir(), "kura-bench-"));
    const env: Record<string, string> = {};
    // UV_THREADPOOL_SIZE as deploy/kura.service and `bun run start` set it (src/delivery/thread-pool.ts).
    const deployed = { UV_THREADPOOL_SIZE: "16" };
    for (const [k, v] of Object.entries({ ...deployed, ...process.env, KURA_LISTEN: "127.0.0.1:0", KURA_DATA_DIR: dataDir, ...opts.env })) {
      if (v !== undefined) env[k] = v;
    }
    // `bun run <file>` runs the script in this very process (no wrapper), so proc.pid is
    // the server whose memory we report.
    const proc = Bun.spawn(["bun", ...(opts.bunArgs ?? []), "run", opts.entry ?? join(ROOT, "src/main.ts"), "serve"], {
      cwd: dataDir,
      env,
      stdout: "pipe",
      stderr: "pipe",
    });
    const server = new BenchServer(proc, dataDir);
    void server.pump();
    const ready = await server.waitForLog(opts.ready ?? READY, opts.startTimeoutMs ?? 20_000).catch(() => undefined);
    if (!ready) {
      await server.dispose();
      throw new Error(`服务未能启动（退出码 ${proc.exitCode}）：\n${server.logs}`);
    }
    server.base = `http://${ready[1]}`;
    return server;
  }

  get pid(): number {
    return this.proc.pid;
  }

  private async pump() {
    const decoder = new TextDecoder();
    const read = async (stream: ReadableStream<Uint8Array>) => {
      for await (const chunk of stream) this.logs += decoder.decode(chunk, { stream: true });
    };
    await Promise.all([read(this.proc.stderr as ReadableStream<Uint8Array>), read(this.proc.stdout as ReadableStream<Uint8Array>)]);
  }

  async waitForLog(pattern: RegExp, timeoutMs = 10_000): Promise<RegExpMatchArray> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const m = this.logs.match(pattern);
      if (m) return m;
      if (Date.now() > deadline || this.proc.exitCode !== null) throw new Error(`未等到日志 ${pattern}`);
      await Bun.sleep(20);
    }
  }

  /** The factory default password most recently logged for a user. */
  defaultPassword(name = "admin"): string {
    const all = [...this.logs.matchAll(new RegExp(`user=${name} password=(\\S+)`, "g"))];
    if (!all.length) throw new Error(`日志中没有用户 ${name} 的出厂默认密码`);
    return all.at(-1)![1]!;
  }

  url(path: string): string {
    return this.base + path;
  }

  /** Peak resident set size (VmHWM) of the server process so far, in bytes. */
  peakRssBytes(): number {
    return readProcStatusKb(this.pid, "VmHWM") * 1024;
  }

  /** Current resident set size (VmRSS), in bytes. */
  rssBytes(): number {
    return readProcStatusKb(this.pid, "VmRSS") * 1024;
  }

  /** CPU time (user + system, all threads) the server has used so far, in milliseconds. */
  cpuMs(): number {
    return processCpuMs(this.pid);
  }

  /** CPU time of the main thread only (the one JS thread that serves HTTP), in milliseconds. */
  mainThreadCpuMs(): number {
    return oneThreadCpuMs(this.pid);
  }

  async dispose(): Promise<void> {
    if (this.proc.exitCode === null) this.proc.kill("SIGTERM");
    await this.proc.exited;
    rmSync(this.dataDir, { recursive: true, force: true });
  }
}

export function readProcStatusKb(pid: number, field: "VmHWM" | "VmRSS"): number {
  const m = new RegExp(`${field}:\\s+(\\d+) kB`).exec(readFileSync(`/proc/${pid}/status`, "utf8"));
  if (!m) throw new Error(`/proc/${pid}/status 中没有 ${field}`);
  return Number(m[1]);
}
