import client from "prom-client";
import { getOrCreate } from "../shared/get-or-create";

/**
 * Counts for one label set, kept as a plain number until the next scrape. prom-client hashes
 * and validates the labels on every `inc()` (even through `labels()` children), which was
 * about 1 µs of the ~15 µs a hot image delivery costs (bench/README.md).
 */
export interface CountHandle {
  inc(): void;
  /** Adds `n` at once (counts reported by a delivery thread). */
  add(n: number): void;
}

/**
 * A prom-client Counter fed in batches: `child(labels)` once, then `inc()` is one addition;
 * `flush()` (the counter's `collect`, run by every scrape) hands the sums over, so
 * `/metrics` shows exactly what a per-event `inc` would have.
 */
export class PendingCounter<L extends string> {
  private readonly children = new Map<string, { labels: Partial<Record<L, string>>; n: number }>();
  private readonly counter: client.Counter<L>;

  /** Registers the prom-client Counter behind it, whose `collect` hands the batch over. */
  constructor(name: string, help: string, labelNames: readonly L[], registry: client.Registry) {
    this.counter = new client.Counter({ name, help, labelNames, registers: [registry], collect: () => this.flush() });
  }

  child(labels: Partial<Record<L, string>>): CountHandle {
    const key = Object.values(labels).join("\u0000");
    const e = getOrCreate(this.children, key, () => ({ labels, n: 0 }));
    return {
      inc: () => void e.n++,
      add: (n: number) => {
        e.n += n;
      },
    };
  }

  inc(labels: Partial<Record<L, string>>) {
    this.child(labels).inc();
  }

  flush() {
    for (const e of this.children.values()) {
      if (e.n === 0) continue;
      this.counter.inc(e.labels, e.n);
      e.n = 0;
    }
  }
}

interface SeriesData {
  labels: Record<string, string>;
  /** Observations per bucket (not cumulative), like prom-client. */
  buckets: Float64Array;
  sum: number;
  count: number;
}

/** One label set of a FastHistogram. */
export interface HistogramHandle {
  observe(value: number): void;
}

/**
 * A histogram with prom-client's exposition (same lines, labels and order) whose label sets
 * are resolved once (`series`) instead of hashed on every observation. Registered in the
 * registry as a custom metric object.
 */
export class FastHistogram {
  readonly type = "histogram";
  readonly aggregator = "sum";
  private readonly data = new Map<string, SeriesData>();

  constructor(
    readonly name: string,
    readonly help: string,
    readonly labelNames: readonly string[],
    private readonly upperBounds: readonly number[],
    registry: client.Registry,
  ) {
    registry.registerMetric(this as unknown as client.Metric);
  }

  series(labels: Record<string, string>): HistogramHandle {
    const key = this.labelNames.map((n) => labels[n]).join("\u0000");
    const s = getOrCreate(this.data, key, () => ({ labels, buckets: new Float64Array(this.upperBounds.length), sum: 0, count: 0 }));
    const bounds = this.upperBounds;
    return {
      observe(value: number) {
        s.sum += value;
        s.count++;
        for (let i = 0; i < bounds.length; i++) {
          if (value <= bounds[i]!) {
            s.buckets[i]!++;
            return;
          }
        }
      },
    };
  }

  reset() {
    for (const d of this.data.values()) {
      d.buckets.fill(0);
      d.sum = 0;
      d.count = 0;
    }
  }

  /** What prom-client's Histogram returns: cumulative buckets, +Inf, sum, count per label set. */
  getForPromString() {
    type Value = { labels: Record<string, string | number>; sharedLabels: Record<string, string>; value: number; metricName: string; exemplar?: null };
    const values: Value[] = [];
    for (const d of this.data.values()) {
      let acc = 0;
      this.upperBounds.forEach((le, i) => {
        acc += d.buckets[i]!;
        values.push({ labels: { le }, sharedLabels: d.labels, value: acc, metricName: `${this.name}_bucket`, exemplar: null });
      });
      values.push({ labels: { le: "+Inf" }, sharedLabels: d.labels, value: d.count, metricName: `${this.name}_bucket`, exemplar: null });
      values.push({ labels: {}, sharedLabels: d.labels, value: d.sum, metricName: `${this.name}_sum` });
      values.push({ labels: {}, sharedLabels: d.labels, value: d.count, metricName: `${this.name}_count` });
    }
    return { name: this.name, help: this.help, type: this.type, values, aggregator: this.aggregator };
  }

  /** The JSON form (labels merged), as `registry.getMetricsAsJSON()` expects. */
  get() {
    const data = this.getForPromString();
    return { ...data, values: data.values.map(({ labels, sharedLabels, ...rest }) => ({ ...rest, labels: { ...labels, ...sharedLabels } })) };
  }
}
