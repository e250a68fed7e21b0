/**
 * Plumbing shared by the real-server harnesses (Apache, sshd): a free loopback
 * port, a daemon child process that is known to listen before tests start, and
 * a stop that also ends the daemon's per-connection children.
 */
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { connect } from "node:net";

/** Fails loudly (never skips) when a server binary is missing, naming the Debian package. */
export function requireBinary(path: string, debianPackage: string): void {
  if (!existsSync(path)) {
    throw new Error(`缺少 ${path}：请先安装 Debian 软件包 ${debianPackage} (apt-get install -y ${debianPackage})`);
  }
}

async function canConnect(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({ host: "127.0.0.1", port });
    socket.once("connect", () => {
      socket.destroy();
      resolve(true);
    });
    socket.once("error", () => resolve(false));
  });
}

export interface Daemon {
  readonly pid: number;
  stop(): Promise<void>;
  /** Kills the per-connection children only: open connections drop, the listener stays. */
  dropConnections(): void;
  /** Sends `signal` to the daemon's descendants named `comm` (e.g. SIGSTOP to a subsystem); returns how many. */
  signalDescendants(comm: string, signal: NodeJS.Signals): number;
}

function killAll(pids: number[]): void {
  for (const pid of pids) {
    try {
      process.kill(pid, "SIGKILL");
    } catch {
      // Already gone.
    }
  }
}

/**
 * Starts `argv` in the foreground and waits until 127.0.0.1:`port` accepts
 * connections. If it exits first, its stderr is part of the thrown error.
 */
export async function startDaemon(argv: string[], port: number, env?: Record<string, string>): Promise<Daemon> {
  const child = Bun.spawn(argv, { stdin: "ignore", stdout: "ignore", stderr: "pipe", env: { ...process.env, ...env } });
  const stderr = new Response(child.stderr).text();
  let exited = false;
  void child.exited.then(() => (exited = true));
  const deadline = Date.now() + 10_000;
  while (!(await canConnect(port))) {
    if (exited || Date.now() > deadline) {
      child.kill("SIGKILL");
      await child.exited;
      throw new Error(`${argv[0]} 未能在 127.0.0.1:${port} 上启动: ${(await stderr).trim().slice(-2000)}`);
    }
    await Bun.sleep(20);
  }
  return {
    pid: child.pid,
    dropConnections() {
      killAll(descendantsOf(child.pid));
    },
    signalDescendants(comm, signal) {
      let sent = 0;
      for (const pid of descendantsOf(child.pid)) {
        try {
          if (readFileSync(`/proc/${pid}/comm`, "utf8").trim() !== comm) continue;
          process.kill(pid, signal);
          sent++;
        } catch {
          // Exited while we looked.
        }
      }
      return sent;
    },
    async stop() {
      // Daemons fork one process per connection (sshd even in its own session):
      // those keep serving open connections unless they are ended too.
      // Frozen first: a connection accepted between the listing and the SIGTERM forked a child the
      // listing missed, which then served on, orphaned (an SFTP channel that stayed healthy while
      // its server was "down", once in CI).
      child.kill("SIGSTOP");
      const children = descendantsOf(child.pid);
      killAll(children);
      child.kill("SIGTERM");
      child.kill("SIGCONT");
      const timer = setTimeout(() => child.kill("SIGKILL"), 5_000);
      await child.exited;
      clearTimeout(timer);
      // The port must be free again before the caller restarts on it.
      const until = Date.now() + 5_000;
      while ((await canConnect(port)) && Date.now() < until) await Bun.sleep(20);
    },
  };
}

/** Process ids whose parent chain leads to `root`, read from /proc (Linux). */
function descendantsOf(root: number): number[] {
  const parents = new Map<number, number>();
  for (const name of readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    try {
      // "pid (comm) state ppid ...": comm may contain spaces, so split after the last ')'.
      const stat = readFileSync(`/proc/${name}/stat`, "utf8");
      const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
      parents.set(Number(name), ppid);
    } catch {
      // Exited while we looked.
    }
  }
  const found: number[] = [];
  const queue = [root];
  while (queue.length > 0) {
    const current = queue.shift()!;
    for (const [pid, ppid] of parents) {
      if (ppid === current) {
        found.push(pid);
        queue.push(pid);
      }
    }
  }
  return found;
}
