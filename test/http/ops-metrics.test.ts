/**
 * The operator's signals in /metrics (observability audit): Kura's open alerts by kind (the webhook's
 * payload is not Alertmanager's, so this is how an alert reaches it), when a backup last reached a
 * channel (kept across a restart, so a rule on its age does not fire after every restart), the build,
 * the database and WAL sizes and the data directory's free space.
 */
import { expect, test } from "bun:test";
import { mkdtempSync, renameSync, rmSync, statSync, statfsSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { useAdmin } from "../helpers/fixture";
import { metricValue } from "../helpers/metrics";
import { KuraServer } from "../helpers/server";

const { server, admin } = useAdmin();
const value = (sample: string) => metricValue(server.base, sample);

test("open alerts by kind, every kind present at 0 before its first alert", async () => {
  for (const kind of ["channel_unhealthy", "replication_failed", "channel_quota_exceeded", "drain_failed", "backup_failed"]) {
    expect([kind, await value(`kura_alerts_open{kind="${kind}"}`)]).toEqual([kind, 0]);
  }
  // A local channel whose directory becomes a file opens channel_unhealthy at its check.
  const dir = mkdtempSync(join(tmpdir(), "kura-ops-metrics-"));
  try {
    const ch = await admin.json("POST", "/api/admin/channels", { name: "shaky", driver: "local", config: { path: dir } }, 201);
    renameSync(dir, `${dir}.away`);
    writeFileSync(dir, "not a directory");
    await admin.json("POST", `/api/admin/channels/${ch.id}/check`);
    const deadline = Date.now() + 15_000;
    while ((await value('kura_alerts_open{kind="channel_unhealthy"}')) < 1 && Date.now() < deadline) await Bun.sleep(100);
    expect(await value('kura_alerts_open{kind="channel_unhealthy"}')).toBe(1);
    const open = (await admin.json("GET", "/api/admin/alerts")).items.filter((a: { kind: string }) => a.kind === "channel_unhealthy");
    expect(open).toHaveLength(1);
    await admin.json("DELETE", `/api/admin/channels/${ch.id}?purge=false`, undefined, 204);
  } finally {
    rmSync(dir, { force: true });
    rmSync(`${dir}.away`, { recursive: true, force: true });
  }
});

test("the last successful backup's time, kept across a restart", async () => {
  expect(await value("kura_backup_last_success_timestamp_seconds")).toBe(0);
  const before = Math.floor(Date.now() / 1000);
  await admin.json("POST", "/api/admin/backups", undefined, 201);
  const at = await value("kura_backup_last_success_timestamp_seconds");
  expect(at).toBeGreaterThanOrEqual(before);
  expect(at).toBeLessThanOrEqual(Math.ceil(Date.now() / 1000));
  await server.stop();
  const again = await KuraServer.start({ dataDir: server.dataDir });
  try {
    expect(await metricValue(again.base, "kura_backup_last_success_timestamp_seconds")).toBe(at);
  } finally {
    await again.stop();
  }
});

test("the build, the database's and WAL's sizes, and the data directory's free space", async () => {
  const other = await KuraServer.start();
  try {
    const text = await (await fetch(other.url("/metrics"))).text();
    expect(text).toMatch(/^kura_build_info\{version="\d+\.\d+\.\d+",commit="[^"]+",runtime="bun \d+\.\d+\.\d+"\} 1$/m);
    // prom-client's defaults that mean nothing under Bun are gone; those that do stay.
    for (const gone of [
      "process_heap_bytes",
      "nodejs_version_info",
      "nodejs_active_handles_total",
      "nodejs_gc_duration_seconds",
      "nodejs_heap_space_size_used_bytes",
    ]) {
      expect([gone, text.includes(`\n${gone}`)]).toEqual([gone, false]);
    }
    for (const kept of ["process_resident_memory_bytes", "process_cpu_seconds_total", "process_open_fds", "nodejs_eventloop_lag_p99_seconds"]) {
      expect([kept, text.includes(`\n${kept} `)]).toEqual([kept, true]);
    }
    const db = await metricValue(other.base, "kura_db_size_bytes");
    // A checkpoint may grow the file between the scrape and the stat.
    expect(db).toBeGreaterThan(0);
    expect(Math.abs(db - statSync(join(other.dataDir, "kura.db")).size)).toBeLessThan(1024 * 1024);
    expect(await metricValue(other.base, "kura_db_wal_size_bytes")).toBeGreaterThanOrEqual(0);
    const fs = statfsSync(other.dataDir);
    const free = await metricValue(other.base, "kura_datadir_free_bytes");
    expect(Math.abs(free - fs.bavail * fs.bsize)).toBeLessThan(64 * 1024 * 1024);
  } finally {
    await other.dispose();
  }
});
