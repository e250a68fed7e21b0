// One wrk measurement with the CPU accounting the delivery bench reports: CPU of the process
// under test per request, and the cores other processes (not server, not wrk, not us) used.
import { ownCpuMs, systemBusyMs } from "./machine";
import { runWrk, type WrkOptions, type WrkResult } from "./wrk";

export interface LoadRun extends WrkResult {
  /** CPU of the server under test (all its threads/processes) per request, ms. */
  serverCpuMsPerReq: number;
  /** Average cores used by everything else on the machine during the run. */
  otherCores: number;
  /** Average cores the server under test used (all its threads/processes). */
  serverCores: number;
  /** Average cores of the server's main thread, when asked for. */
  mainThreadCores?: number;
}

export async function measuredWrk(opts: WrkOptions, serverCpuMs: () => number, mainThreadCpuMs?: () => number): Promise<LoadRun> {
  const server0 = serverCpuMs();
  const main0 = mainThreadCpuMs?.();
  const own0 = ownCpuMs();
  const busy0 = systemBusyMs();
  const t0 = performance.now();
  const r = await runWrk(opts);
  const wall = performance.now() - t0;
  const server = serverCpuMs() - server0;
  const main = main0 === undefined ? undefined : mainThreadCpuMs!() - main0;
  const other = systemBusyMs() - busy0 - server - (ownCpuMs() - own0) - r.clientCpuMs;
  return {
    ...r,
    serverCpuMsPerReq: server / r.requests,
    otherCores: Math.max(0, other) / wall,
    serverCores: server / wall,
    ...(main === undefined ? {} : { mainThreadCores: main / wall }),
  };
}

/** Requests/s over several runs, weighted by their length. */
export function pooledRate(runs: readonly WrkResult[]): number {
  return runs.reduce((s, r) => s + r.requests, 0) / (runs.reduce((s, r) => s + r.wallMs, 0) / 1000);
}
