import { describe, expect, test } from "bun:test";
import { useAdmin } from "../helpers/fixture";
import { form, makeJpeg } from "../helpers/images";
import type { KuraServer } from "../helpers/server";
import { cpuSecondsOf } from "./hardening.helpers";

/** Every duration setting at its documented cap: 100 years in the setting's own unit. */
const YEARS_100 = { ms: 3_153_600_000_000, seconds: 3_153_600_000, minutes: 52_560_000, hours: 876_000, days: 36_500 };
const AT_CAP = {
  health_check_seconds: YEARS_100.seconds,
  backup_interval_hours: YEARS_100.hours,
  cleanup_sweep_seconds: YEARS_100.seconds,
  delete_grace_minutes: YEARS_100.minutes,
  default_ttl_hours: YEARS_100.hours,
  activity_flush_seconds: YEARS_100.seconds,
  cold_cleanup_days: YEARS_100.days,
  usage_report_seconds: YEARS_100.seconds,
  dedup_scan_seconds: YEARS_100.seconds,
  process_timeout_ms: YEARS_100.ms,
  idempotency_key_ttl_hours: YEARS_100.hours,
  audit_retention_days: YEARS_100.days,
};

/** Share of one core the server used over `seconds` of wall time. */
async function cpuShare(server: KuraServer, seconds: number): Promise<number> {
  const before = cpuSecondsOf(server);
  const started = performance.now();
  await Bun.sleep(seconds * 1000);
  return (cpuSecondsOf(server) - before) / ((performance.now() - started) / 1000);
}

describe("row 8: duration settings at their caps", () => {
  const { server, admin } = useAdmin();

  test("every duration at its cap is accepted, the server stays idle and variants render", async () => {
    const saved = await admin.json("PUT", "/api/admin/config", AT_CAP);
    expect(saved.settings).toMatchObject(AT_CAP);
    await Bun.sleep(300); // loops reschedule on the change
    // A timer asked for more than 2^31-1 ms fires after 1 ms: each loop would spin.
    const share = await cpuShare(server, 3);
    expect(share).toBeLessThan(0.2);

    const jpeg = await makeJpeg(800, 600, 5);
    const { id } = await admin.json("POST", "/api/admin/upload", form(jpeg, "wide.jpg"));
    const res = await fetch(server.url(`/i/${id}?w=320&format=webp`));
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toBe("image/webp");
    // A render that "timed out" at once would fall back to the original with no-store.
    expect(res.headers.get("cache-control")).not.toBe("no-store");
    const bytes = new Uint8Array(await res.arrayBuffer());
    expect(bytes.byteLength).toBeGreaterThan(0);
    expect(bytes.byteLength).toBeLessThan(jpeg.byteLength);
    expect(server.logs).not.toMatch(/TimeoutOverflowWarning|level=ERROR/);
  });
});
