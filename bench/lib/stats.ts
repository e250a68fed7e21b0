// Closed-loop load generation and the numbers we print from it.

export interface RunResult {
  count: number;
  wallMs: number;
  /** Per-task latency in milliseconds, in completion order. */
  latenciesMs: number[];
}

/**
 * Runs `task` once per item with at most `concurrency` in flight (each worker starts the
 * next item as soon as its previous one finishes). Any failure aborts the run: a bench
 * that silently counts errors as work reports nonsense.
 */
export async function runPool<T>(items: readonly T[], concurrency: number, task: (item: T, index: number) => Promise<void>): Promise<RunResult> {
  const latenciesMs: number[] = [];
  let next = 0;
  let failed: unknown;
  const worker = async () => {
    while (failed === undefined && next < items.length) {
      const index = next++;
      const started = performance.now();
      try {
        await task(items[index]!, index);
      } catch (err) {
        failed ??= err;
        return;
      }
      latenciesMs.push(performance.now() - started);
    }
  };
  const started = performance.now();
  await Promise.all(Array.from({ length: Math.max(1, Math.min(concurrency, items.length)) }, worker));
  const wallMs = performance.now() - started;
  if (failed !== undefined) throw failed;
  return { count: items.length, wallMs, latenciesMs };
}

/** Nearest-rank percentile (p in 0..100) of unsorted values. */
export function percentile(values: readonly number[], p: number): number {
  if (values.length === 0) return NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const rank = Math.ceil((p / 100) * sorted.length);
  return sorted[Math.min(sorted.length - 1, Math.max(0, rank - 1))]!;
}

export interface Summary {
  perSecond: number;
  p50Ms: number;
  p99Ms: number;
}

export function summarize(run: RunResult): Summary {
  return {
    perSecond: run.count / (run.wallMs / 1000),
    p50Ms: percentile(run.latenciesMs, 50),
    p99Ms: percentile(run.latenciesMs, 99),
  };
}

export const fmtRate = (n: number) => n.toFixed(1);
export const fmtMs = (n: number) => n.toFixed(1);
export const fmtMiB = (bytes: number) => (bytes / 1048576).toFixed(0);

/** Left-aligned text table; every row must have as many cells as the header. */
export function table(header: string[], rows: string[][]): string {
  // CJK characters take two terminal columns.
  const width = (s: string) => [...s].reduce((w, ch) => w + (/[\u1100-\uffdc]/.test(ch) ? 2 : 1), 0);
  const cols = header.map((h, i) => Math.max(width(h), ...rows.map((r) => width(r[i] ?? ""))));
  const line = (cells: string[]) =>
    cells
      .map((c, i) => c + " ".repeat(cols[i]! - width(c)))
      .join("  ")
      .trimEnd();
  return [line(header), line(cols.map((w) => "-".repeat(w))), ...rows.map(line)].join("\n");
}
