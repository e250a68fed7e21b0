import client from "prom-client";
import { FastHistogram, PendingCounter } from "./metrics-batch";

const MISLEADING_UNDER_BUN = [
  "process_heap_bytes",
  "nodejs_active_resources",
  "nodejs_active_resources_total",
  "nodejs_active_handles",
  "nodejs_active_handles_total",
  "nodejs_active_requests",
  "nodejs_active_requests_total",
  "nodejs_heap_space_size_total_bytes",
  "nodejs_heap_space_size_used_bytes",
  "nodejs_heap_space_size_available_bytes",
  "nodejs_version_info",
  "nodejs_gc_duration_seconds",
];

/** One registry per process: prom-client defaults (those that mean something under Bun) plus Kura's own metrics. */
export function createMetrics() {
  const registry = new client.Registry();
  client.collectDefaultMetrics({ register: registry });
  // prom-client reads these from Node's APIs, which Bun emulates: always 0 (handles, requests,
  // resources, heap spaces), empty (GC durations), Node's version rather than Bun's, or a
  // process "heap" that is Bun's multi-gigabyte address reservation (6 GB on an idle server, which
  // reads as a leak). Gone rather than misleading; kura_build_info says what runs.
  for (const name of MISLEADING_UNDER_BUN) registry.removeSingleMetric(name);
  // Counted on every request: batched (see metrics-batch.ts), same exposition as before.
  const httpCounts = new PendingCounter("kura_http_requests_total", "HTTP 请求数（按路由模板）", ["method", "route", "status"] as const, registry);
  const httpDuration = new FastHistogram(
    "kura_http_request_duration_seconds",
    "HTTP 请求耗时（秒）",
    ["method", "route"],
    [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    registry,
  );
  const uploadDuration = new client.Histogram({
    name: "kura_upload_duration_seconds",
    help: "上传处理耗时（秒）：ok 成功，rejected 输入无效或超额，failed 基础设施故障",
    labelNames: ["outcome"] as const,
    buckets: [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
    registers: [registry],
  });
  const channelPuts = new client.Counter({
    name: "kura_channel_puts_total",
    help: "写入存储渠道的次数（同步与异步）",
    labelNames: ["channel", "result"] as const,
    registers: [registry],
  });
  // Reads of an original from a channel (cold /i/, render sources, replication): an `error` is a failover.
  const channelReads = new client.Counter({
    name: "kura_channel_reads_total",
    help: "从存储渠道读取原图的次数：ok 打开成功，error 失败并切换到下一个渠道",
    labelNames: ["channel", "result"] as const,
    registers: [registry],
  });
  const variantLookups = new PendingCounter("kura_variant_lookups_total", "变体缓存查找次数", ["result"] as const, registry);
  const variantRenders = new client.Counter({
    name: "kura_variant_renders_total",
    help: "实际执行的变体生成（编码）次数",
    labelNames: ["format", "result"] as const,
    registers: [registry],
  });
  // Renders that missed process_timeout_ms and went on (transform.ts `late`): kept, killed by libvips' own limit, or failed.
  const variantLateRenders = new client.Counter({
    name: "kura_variant_late_renders_total",
    help: "超过 process_timeout_ms 后继续执行的渲染的结局：kept 已缓存，killed 被终止，failed 出错",
    labelNames: ["format", "result"] as const,
    registers: [registry],
  });
  // Answers a delivery thread gave from its own memory (everything else it hands to the main thread).
  const threadAnswers = new PendingCounter("kura_delivery_thread_answers_total", "投递线程直接给出的 /i/ 应答数（按线程）", ["thread"] as const, registry);
  const deliveryThreads = new client.Gauge({ name: "kura_delivery_threads", help: "正在运行的投递线程数（不含主线程）", registers: [registry] });
  // WAL checkpoints made by the worker (src/db/checkpointer.ts); none at all under writes means it fell back.
  const walCheckpoints = new client.Counter({
    name: "kura_db_wal_checkpoints_total",
    help: "SQLite WAL 检查点次数：copy 为后台线程复制，restart 为 WAL 过长时主线程补完并让其从头开始",
    labelNames: ["kind"] as const,
    registers: [registry],
  });
  // Upload writes and the commits they shared (src/db/group-commit.ts): the ratio is the batching achieved.
  const groupCommitUnits = new client.Counter({ name: "kura_db_group_commit_units_total", help: "经合并提交写入的事务单元数", registers: [registry] });
  const groupCommits = new client.Counter({ name: "kura_db_group_commits_total", help: "合并提交执行的 SQLite 提交次数", registers: [registry] });
  /** Run (and awaited) before each scrape: the delivery threads hand in their counts, so a scrape shows every answer given before it. */
  const beforeScrape = new Set<() => Promise<void>>();
  const scrape = async () => {
    await Promise.all([...beforeScrape].map((gather) => gather()));
    return registry.metrics();
  };
  return {
    registry,
    scrape,
    beforeScrape,
    httpCounts,
    httpDuration,
    uploadDuration,
    channelPuts,
    channelReads,
    variantLookups,
    variantRenders,
    variantLateRenders,
    threadAnswers,
    deliveryThreads,
    walCheckpoints,
    groupCommitUnits,
    groupCommits,
  };
}

export type Metrics = ReturnType<typeof createMetrics>;

/** A gauge whose value is read at scrape time; a failing reader reports NaN. */
export function scrapeGauge(registry: client.Registry, name: string, help: string, read: () => number) {
  return new client.Gauge({
    name,
    help,
    registers: [registry],
    collect() {
      let value: number;
      try {
        value = read();
      } catch {
        value = Number.NaN;
      }
      this.set(value);
    },
  });
}
