// HTTP load with wrk (Debian package `wrk`): a C load generator costs far less CPU per
// request than a Bun client, which matters when it shares 2 cores with the server under test.
// A Lua `done` hook prints the exact numbers as one JSON line instead of wrk's rounded text.
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

export interface WrkOptions {
  url: string;
  headers?: Record<string, string>;
  connections: number;
  threads: number;
  durationS: number;
}

export interface WrkResult {
  requests: number;
  wallMs: number;
  perSecond: number;
  p50Ms: number;
  p99Ms: number;
  /** Body + header bytes read, from wrk. */
  bytes: number;
  /** CPU time wrk itself used (user + system), ms. */
  clientCpuMs: number;
}

// Latencies are in microseconds in wrk's histogram.
const DONE_HOOK = `
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format('\\nKURA_WRK {"requests":%d,"duration_us":%d,"bytes":%d,"p50_us":%d,"p99_us":%d,"connect":%d,"read":%d,"write":%d,"status":%d,"timeout":%d}\\n',
    summary.requests, summary.duration, summary.bytes, latency:percentile(50), latency:percentile(99),
    e.connect, e.read, e.write, e.status, e.timeout))
end
`;

let scriptPath: string | undefined;
function hookScript(): string {
  if (!scriptPath) {
    const dir = mkdtempSync(join(tmpdir(), "kura-bench-wrk-"));
    scriptPath = join(dir, "done.lua");
    writeFileSync(scriptPath, DONE_HOOK);
    process.once("exit", () => rmSync(dir, { recursive: true, force: true }));
  }
  return scriptPath;
}

/** True when `wrk` is on PATH; the bench explains how to install it otherwise. */
export function haveWrk(): boolean {
  return Bun.which("wrk") !== null;
}

/**
 * One closed-loop wrk run. Any error (connect, read, timeout, non-2xx/3xx status) aborts:
 * a server that answers 500 fast must not look like a fast server.
 */
export async function runWrk(opts: WrkOptions): Promise<WrkResult> {
  const args = ["wrk", `-t${opts.threads}`, `-c${opts.connections}`, `-d${opts.durationS}s`, "--timeout", "10s", "-s", hookScript()];
  for (const [k, v] of Object.entries(opts.headers ?? {})) args.push("-H", `${k}: ${v}`);
  args.push(opts.url);
  const proc = Bun.spawn(args, { stdout: "pipe", stderr: "pipe" });
  const [out, err] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text()]);
  const code = await proc.exited;
  const line = /KURA_WRK (\{.*\})/.exec(out);
  if (code !== 0 || !line) throw new Error(`wrk 运行失败（退出码 ${code}）：${err || out}`);
  const r = JSON.parse(line[1]!) as Record<string, number>;
  const errors = r.connect! + r.read! + r.write! + r.status! + r.timeout!;
  if (errors > 0) {
    throw new Error(`wrk 报告错误：connect=${r.connect} read=${r.read} write=${r.write} 非2xx/3xx=${r.status} timeout=${r.timeout}（${opts.url}）`);
  }
  if (r.requests! === 0) throw new Error(`wrk 没有完成任何请求（${opts.url}）`);
  const cpu = proc.resourceUsage()?.cpuTime.total ?? 0n;
  const wallMs = r.duration_us! / 1000;
  return {
    requests: r.requests!,
    wallMs,
    perSecond: r.requests! / (wallMs / 1000),
    p50Ms: r.p50_us! / 1000,
    p99Ms: r.p99_us! / 1000,
    bytes: r.bytes!,
    clientCpuMs: Number(cpu) / 1000,
  };
}
