// nginx serving static files from a temp dir (Debian package `nginx`): the reference for
// "how fast can this machine send these bytes over HTTP". Minimal config, no logging, one
// worker per core, sendfile on; everything (pid, temp paths, error log) stays in the temp dir.
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { cpus, tmpdir } from "node:os";
import { join } from "node:path";
import { processCpuMs } from "./machine";

export function haveNginx(): boolean {
  return Bun.which("nginx") !== null || Bun.which("nginx", { PATH: "/usr/sbin:/sbin" }) !== null;
}

function nginxBinary(): string {
  const bin = Bun.which("nginx") ?? Bun.which("nginx", { PATH: "/usr/sbin:/sbin" });
  if (!bin) throw new Error("找不到 nginx（Debian：apt-get install -y nginx）");
  return bin;
}

/** A loopback port that was free a moment ago (nginx binds it right after; a clash fails loudly). */
function freePort(): number {
  const probe = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { data() {} } });
  const port = probe.port;
  probe.stop(true);
  return port;
}

function config(dir: string, port: number, workers: number): string {
  // As root, nginx workers switch to `nobody`, which cannot read a 0700 mkdtemp dir.
  const user = process.getuid?.() === 0 ? "user root;\n" : "";
  return `${user}daemon off;
master_process on;
worker_processes ${workers};
pid ${dir}/nginx.pid;
error_log ${dir}/error.log warn;
events { worker_connections 1024; }
http {
  types { image/jpeg jpg; image/webp webp; }
  default_type application/octet-stream;
  access_log off;
  sendfile on;
  tcp_nopush on;
  keepalive_requests 1000000;
  client_body_temp_path ${dir}/tmp/body;
  proxy_temp_path ${dir}/tmp/proxy;
  fastcgi_temp_path ${dir}/tmp/fastcgi;
  uwsgi_temp_path ${dir}/tmp/uwsgi;
  scgi_temp_path ${dir}/tmp/scgi;
  server {
    listen 127.0.0.1:${port};
    root ${dir}/www;
  }
}
`;
}

export class NginxServer {
  private constructor(
    readonly proc: ReturnType<typeof Bun.spawn>,
    readonly dir: string,
    readonly base: string,
  ) {}

  /** Serves `files` (name → bytes) at `/<name>` with `workers` worker processes (default: one per core). */
  static async start(files: Record<string, Uint8Array>, workers = cpus().length): Promise<NginxServer> {
    const dir = mkdtempSync(join(tmpdir(), "kura-bench-nginx-"));
    mkdirSync(join(dir, "www"));
    mkdirSync(join(dir, "tmp"));
    for (const [name, bytes] of Object.entries(files)) writeFileSync(join(dir, "www", name), bytes);
    const port = freePort();
    writeFileSync(join(dir, "nginx.conf"), config(dir, port, workers));
    const proc = Bun.spawn([nginxBinary(), "-e", join(dir, "error.log"), "-p", dir, "-c", join(dir, "nginx.conf")], { stdout: "ignore", stderr: "pipe" });
    const server = new NginxServer(proc, dir, `http://127.0.0.1:${port}`);
    const probe = `${server.base}/${Object.keys(files)[0]}`;
    const deadline = Date.now() + 5000;
    for (;;) {
      const ok = await fetch(probe).then(
        (r) => r.arrayBuffer().then(() => r.status === 200),
        () => false,
      );
      if (ok) return server;
      if (proc.exitCode !== null || Date.now() > deadline) {
        const stderr = await new Response(proc.stderr as ReadableStream).text().catch(() => "");
        await server.dispose();
        throw new Error(`nginx 未能启动（退出码 ${proc.exitCode}）：${stderr}${safeRead(join(dir, "error.log"))}`);
      }
      await Bun.sleep(20);
    }
  }

  url(path: string): string {
    return this.base + path;
  }

  /** Pids of the master and its workers (workers are the master's children). */
  pids(): number[] {
    const master = this.proc.pid;
    const out = [master];
    for (const name of readdirSync("/proc")) {
      if (!/^\d+$/.test(name)) continue;
      const stat = safeRead(`/proc/${name}/stat`);
      const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
      if (ppid === master) out.push(Number(name));
    }
    return out;
  }

  /** CPU used so far by the master and all current workers, ms. */
  cpuMs(): number {
    let total = 0;
    for (const pid of this.pids()) {
      try {
        total += processCpuMs(pid);
      } catch {
        // a worker that just exited
      }
    }
    return total;
  }

  async dispose(): Promise<void> {
    // SIGQUIT = graceful stop; the master reaps its workers before exiting.
    if (this.proc.exitCode === null) this.proc.kill("SIGQUIT");
    const timer = setTimeout(() => this.proc.kill("SIGKILL"), 5000);
    await this.proc.exited;
    clearTimeout(timer);
    rmSync(this.dir, { recursive: true, force: true });
  }
}

function safeRead(path: string): string {
  try {
    return readFileSync(path, "utf8");
  } catch {
    return "";
  }
}
