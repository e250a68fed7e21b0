// Reads one counter from the server's /metrics (Prometheus text), so a bench can check that
// what it measured is what it meant to measure (e.g. "warm" requests rendered nothing).
import type { BenchServer } from "./server";

/** Sum of the samples of `name` whose labels include all of `labels` (0 when none). */
export async function counterValue(server: BenchServer, name: string, labels: Record<string, string> = {}): Promise<number> {
  const res = await fetch(server.url("/metrics"));
  const text = await res.text();
  if (res.status !== 200) throw new Error(`读取 /metrics 失败：HTTP ${res.status}：${text.slice(0, 200)}`);
  let sum = 0;
  for (const line of text.split("\n")) {
    if (!line.startsWith(name)) continue;
    const m = /^(\w+)(?:\{([^}]*)\})?\s+(\S+)$/.exec(line);
    if (!m || m[1] !== name) continue;
    const have = new Map([...(m[2] ?? "").matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)].map((l) => [l[1]!, l[2]!]));
    if (Object.entries(labels).every(([k, v]) => have.get(k) === v)) sum += Number(m[3]);
  }
  return sum;
}
