/**
 * Fault tier: two channel peers hang at once (accept connections, never answer). The health
 * round probes channels side by side, so both are marked unhealthy after one probe's timeout;
 * probed in turn, the second would keep its stale "healthy" (and keep getting uploads that must
 * time out first) for another whole timeout and retry.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { useAdmin } from "../helpers/fixture";
import { addProxiedChannel, startProxiedS3, type ProxiedS3 } from "./proxied-s3";

const TIMEOUT_MS = 1_500;
/** One hung probe: the timeout, then the retry of a failed connection. */
const PROBE_MS = 2 * TIMEOUT_MS;

let peers: ProxiedS3[] = [];
const ids: number[] = [];

beforeAll(async () => {
  peers = await Promise.all([startProxiedS3("health-a", "ha"), startProxiedS3("health-b", "hb")]);
});
const { server, admin } = useAdmin({ env: { KURA_CHANNEL_TIMEOUT_MS: String(TIMEOUT_MS), KURA_TEST_HOOKS: "health.round" } });

/** Health rounds begun and ended so far (test-only marks, src/testing/hold-points.ts). */
const rounds = (phase: "begin" | "end") => server.logs.split(`kura-test-hook reached point=health.round phase=${phase}`).length - 1;
beforeAll(async () => {
  for (const [i, peer] of peers.entries()) ids.push(await addProxiedChannel(admin, peer, `hangs-${i}`, 10 - i));
  await admin.json("PUT", "/api/admin/config", { health_check_seconds: 1 });
});
afterAll(() => Promise.all(peers.map((p) => p.stop())));

test("peers that hang together are marked unhealthy together, within one probe's timeout", async () => {
  const healthy = async () => {
    const items = (await admin.json("GET", "/api/admin/channels")).items as { id: number; healthy: boolean }[];
    return ids.map((id) => items.find((c) => c.id === id)!.healthy);
  };
  expect(await healthy()).toEqual([true, true]);

  // Between rounds: a round in flight at the switch may already have probed one peer (healthy) and
  // hang on the other, and the first then waits for that round to end and the next to start, ~4 s
  // apart under CI load though the probes run side by side. Rounds are stopped (interval re-timed
  // to an hour), the in-flight one ends (peers still answer), the peers hang, then rounds resume.
  await admin.json("PUT", "/api/admin/config", { health_check_seconds: 3600 });
  expect(rounds("begin")).toBeGreaterThan(0); // the marks are on: rounds ran since the start
  const deadline = Date.now() + 10_000;
  while (rounds("end") < rounds("begin") && Date.now() < deadline) await Bun.sleep(20);
  expect(rounds("end")).toBe(rounds("begin"));
  for (const peer of peers) peer.proxy.mode = "blackhole";
  await admin.json("PUT", "/api/admin/config", { health_check_seconds: 1 });
  const started = performance.now();
  const unhealthyAt: (number | undefined)[] = [undefined, undefined];
  while (unhealthyAt.some((t) => t === undefined) && performance.now() - started < 4 * PROBE_MS) {
    const now = await healthy();
    const at = performance.now() - started;
    now.forEach((ok, i) => {
      if (!ok) unhealthyAt[i] ??= at;
    });
    await Bun.sleep(100);
  }
  for (const peer of peers) peer.proxy.mode = "pass";

  expect(unhealthyAt.every((t) => t !== undefined)).toBe(true);
  // In turn, the second would follow the first by a whole hung probe (PROBE_MS).
  expect(Math.abs(unhealthyAt[0]! - unhealthyAt[1]!)).toBeLessThan(PROBE_MS / 2);
  // And both within one round's wait plus one hung probe.
  expect(Math.max(...(unhealthyAt as number[]))).toBeLessThan(1_000 + PROBE_MS + 2_000);
});
