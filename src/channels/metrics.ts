import client from "prom-client";
import type { AppContext } from "../context";
import { scrapeGauge } from "../ops/metrics";

/**
 * Channel gauges (spec 4.12). Counts are read at scrape time; storage bytes
 * are a SUM over all done replicas, so they are recomputed at most once per
 * `usage_report_seconds` and served from the last result in between.
 */
export function registerChannelMetrics(app: AppContext) {
  const inService = () => app.channels.list().filter((c) => c.driver && !c.row.deleting);
  scrapeGauge(app.metrics.registry, "kura_channels_total", "已加载的存储渠道数（含不健康，不含删除中或加载失败）", () => inService().length);
  scrapeGauge(app.metrics.registry, "kura_channels_healthy_total", "健康的存储渠道数", () => inService().filter((c) => c.healthy).length);

  let refreshedAt = -Infinity;
  let usage: { name: string; bytes: number }[] = [];
  new client.Gauge({
    name: "kura_channel_storage_bytes",
    help: "各存储渠道已完成副本的图片字节数（每 usage_report_seconds 刷新）",
    labelNames: ["channel"] as const,
    registers: [app.metrics.registry],
    collect() {
      const now = Date.now();
      if (now - refreshedAt >= app.settings.get().usage_report_seconds * 1000) {
        usage = app.channels.repo.usage();
        refreshedAt = now;
      }
      // Channels removed or renamed since the last refresh must not linger as stale series.
      this.reset();
      for (const u of usage) this.set({ channel: u.name }, u.bytes);
    },
  });
}
