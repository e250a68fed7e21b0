import { readFileSync } from "node:fs";
import type { KuraServer } from "../helpers/server";

/** Resident memory of the server process from /proc: current and peak ("high water mark"), in bytes. */
export function memoryOf(server: KuraServer): { rss: number; hwm: number } {
  const status = readFileSync(`/proc/${server.proc.pid}/status`, "utf8");
  const kb = (field: string) => Number(status.match(new RegExp(`^${field}:\\s+(\\d+) kB`, "m"))?.[1] ?? NaN) * 1024;
  return { rss: kb("VmRSS"), hwm: kb("VmHWM") };
}

/** CPU seconds (user + system) the server process has used so far, from /proc/<pid>/stat. */
/**
 * Peak RSS growth of the server while `work` runs: sampled every 5 ms, and from the high-water
 * mark when the run set a new one (then it is the true peak).
 */
export async function peakGrowth<T>(server: KuraServer, work: () => Promise<T>): Promise<{ result: T; growth: number }> {
  const before = memoryOf(server);
  let peak = before.rss;
  const sampler = setInterval(() => {
    try {
      peak = Math.max(peak, memoryOf(server).rss);
    } catch {
      // process gone: the caller's assertions will say so
    }
  }, 5);
  try {
    const result = await work();
    const after = memoryOf(server);
    if (after.hwm > before.hwm) peak = Math.max(peak, after.hwm);
    return { result, growth: peak - before.rss };
  } finally {
    clearInterval(sampler);
  }
}

export function cpuSecondsOf(server: KuraServer): number {
  const stat = readFileSync(`/proc/${server.proc.pid}/stat`, "utf8");
  // Fields after the parenthesised command name; utime and stime are fields 14 and 15.
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

export interface RawAnswer {
  status: number;
  contentType: string;
  body: string;
  /** Body chunks the server pulled before it answered (chunked bodies only). */
  pulled: number;
}

/**
 * One request with full control of the Host header and the body framing: bytes are sent
 * with Content-Length, `{chunk, count}` as a chunked stream the server pulls chunk by chunk.
 * Bun's fetch reads an early answer (413 before the body is consumed) while still uploading.
 */
export async function hostRequest(
  server: KuraServer,
  opts: { method: string; path: string; host: string; headers?: Record<string, string>; body?: Uint8Array | { chunk: Uint8Array; count: number } },
): Promise<RawAnswer> {
  let pulled = 0;
  let body: BodyInit | undefined;
  if (opts.body instanceof Uint8Array) body = opts.body as BodyInit;
  else if (opts.body) {
    const { chunk, count } = opts.body;
    body = new ReadableStream<Uint8Array>({
      pull(controller) {
        if (pulled++ < count) controller.enqueue(chunk);
        else controller.close();
      },
    });
  }
  const res = await fetch(server.url(opts.path), {
    method: opts.method,
    headers: { host: opts.host, ...opts.headers },
    body,
    duplex: "half",
  } as RequestInit);
  return { status: res.status, contentType: res.headers.get("content-type") ?? "", body: await res.text(), pulled };
}
