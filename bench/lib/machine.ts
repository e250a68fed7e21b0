// What else the machine was doing: a bench on a shared box (CI runner, dev VM with other
// jobs) measures the neighbours too, so we report their CPU next to our numbers.
import { readdirSync, readFileSync } from "node:fs";
import { cpus } from "node:os";

const CLK_TCK = 100;

/** Busy CPU time of the whole machine so far (all cores, everything except idle/iowait), ms. */
export function systemBusyMs(): number {
  const line = readFileSync("/proc/stat", "utf8").split("\n", 1)[0]!;
  // cpu user nice system idle iowait irq softirq steal guest guest_nice
  const [user, nice, system, , , irq, softirq, steal] = line.trim().split(/\s+/).slice(1).map(Number);
  return ((user! + nice! + system! + irq! + softirq! + steal!) * 1000) / CLK_TCK;
}

/** CPU time of this process so far (user + system), ms. */
export function ownCpuMs(): number {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1000;
}

export function machineSummary(): string {
  const list = cpus();
  return `${list.length} x ${list[0]?.model ?? "?"}, Bun ${Bun.version}`;
}

/**
 * Tracks CPU used by processes other than the ones we account for, as an average number
 * of busy cores over the interval. Near 0 means the numbers are clean.
 */
export class BackgroundLoad {
  private readonly wall0 = performance.now();
  private readonly busy0 = systemBusyMs();
  private readonly known0: number;

  constructor(private readonly knownCpuMs: () => number) {
    this.known0 = knownCpuMs();
  }

  cores(): number {
    const wall = performance.now() - this.wall0;
    const other = systemBusyMs() - this.busy0 - (this.knownCpuMs() - this.known0);
    return Math.max(0, other) / wall;
  }
}

/** utime + stime of a process (all threads) from /proc/<pid>/stat, ms. */
export function processCpuMs(pid: number): number {
  return statCpuMs(`/proc/${pid}/stat`);
}

/** utime + stime of one thread (`tid` = pid: the main thread, where a Bun server runs its JS), ms. */
export function oneThreadCpuMs(pid: number, tid = pid): number {
  return statCpuMs(`/proc/${pid}/task/${tid}/stat`);
}

function statCpuMs(path: string): number {
  return cpuMsOfStat(readFileSync(path, "utf8"));
}

function cpuMsOfStat(stat: string): number {
  // Field 2 (comm) may contain spaces; everything after its closing parenthesis is fixed.
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return ((Number(fields[11]) + Number(fields[12])) * 1000) / CLK_TCK;
}

/**
 * CPU time (user + system, ms) of a process by thread group: the JS thread ("main"), Bun's
 * thread pool ("pool": fs calls, fsync, native addons such as sharp) and everything else
 * ("other": JIT, GC helpers, allocator). Threads that ended are not counted.
 */
export function threadCpuMs(pid: number): { main: number; pool: number; other: number; faults: number } {
  const out = { main: 0, pool: 0, other: 0, faults: minorFaults(pid) };
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    let stat: string;
    try {
      stat = readFileSync(`/proc/${pid}/task/${tid}/stat`, "utf8");
    } catch {
      continue; // the thread ended meanwhile
    }
    const comm = stat.slice(stat.indexOf("(") + 1, stat.lastIndexOf(")"));
    const ms = cpuMsOfStat(stat);
    if (tid === String(pid)) out.main += ms;
    else if (comm.startsWith("Bun Pool")) out.pool += ms;
    else out.other += ms;
  }
  return out;
}

/** Minor page faults of the whole process so far (field 10 of /proc/<pid>/stat); 0 when unreadable. */
export function minorFaults(pid: number): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[7]);
  } catch {
    return 0;
  }
}
