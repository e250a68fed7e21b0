/**
 * Batched request metrics (src/ops/metrics-batch.ts) must expose exactly what prom-client's own
 * Counter and Histogram expose for the same events: same lines, labels, order and values,
 * across several scrapes, in text and JSON form.
 */
import { describe, expect, test } from "bun:test";
import client from "prom-client";
import { FastHistogram, PendingCounter } from "../../src/ops/metrics-batch";

const BOUNDS = [0.001, 0.005, 0.01, 0.5, 1];

function reference() {
  const registry = new client.Registry();
  const counter = new client.Counter({ name: "t_requests_total", help: "h", labelNames: ["method", "route", "status"] as const, registers: [registry] });
  const histogram = new client.Histogram({ name: "t_seconds", help: "h", labelNames: ["method", "route"] as const, buckets: BOUNDS, registers: [registry] });
  return {
    registry,
    count: (method: string, route: string, status: string) => counter.inc({ method, route, status }),
    observe: (method: string, route: string, v: number) => histogram.observe({ method, route }, v),
  };
}

function batched() {
  const registry = new client.Registry();
  const pending = new PendingCounter("t_requests_total", "h", ["method", "route", "status"] as const, registry);
  const histogram = new FastHistogram("t_seconds", "h", ["method", "route"], BOUNDS, registry);
  return {
    registry,
    count: (method: string, route: string, status: string) => pending.child({ method, route, status }).inc(),
    observe: (method: string, route: string, v: number) => histogram.series({ method, route }).observe(v),
  };
}

const EVENTS: [string, string, string, number][] = [
  ["GET", "/i/:id", "200", 0.0004],
  ["GET", "/i/:id", "200", 0.001], // exactly on a bound: counted in that bucket
  ["GET", "/i/:id", "404", 0.02],
  ["HEAD", "/i/:id", "200", 3], // above the last bound: only +Inf, sum and count
  ["GET", "/api/x", "500", 0.7],
];

describe("batched metrics", () => {
  test("same exposition as prom-client's Counter and Histogram, scrape after scrape", async () => {
    const ref = reference();
    const fast = batched();
    for (const round of [EVENTS, EVENTS.slice(1, 3), [] as typeof EVENTS]) {
      for (const [m, r, s, v] of round) {
        for (const x of [ref, fast]) {
          x.count(m, r, s);
          x.observe(m, r, v);
        }
      }
      expect(await fast.registry.metrics()).toBe(await ref.registry.metrics());
      expect(await fast.registry.getMetricsAsJSON()).toEqual(await ref.registry.getMetricsAsJSON());
    }
    expect(await fast.registry.metrics()).toContain('t_requests_total{method="GET",route="/i/:id",status="200"} 3');
  });

  test("counts between scrapes are handed over once, not twice", async () => {
    const fast = batched();
    fast.count("GET", "/i/:id", "200");
    await fast.registry.metrics();
    await fast.registry.metrics();
    expect(await fast.registry.metrics()).toContain('t_requests_total{method="GET",route="/i/:id",status="200"} 1\n');
  });
});
