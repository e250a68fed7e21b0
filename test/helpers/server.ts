import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";

const ROOT = resolve(import.meta.dir, "../..");
/** How long a started test server may take to be ready before it is killed (see `start`). */
const READY_WAIT_MS = 30_000;
/** How long a stopped test server may take to exit before it is killed (see `stop`). */
const STOP_GRACE_MS = 30_000;

/**
 * A process started with this prefix dies with the test process that started it: `bun test --bail` (as
 * `bun run mutate` runs it) exits without afterAll hooks, and a killed test run must not leave servers
 * (or the test exiftool) behind.
 */
export const DIE_WITH_PARENT = Bun.which("setpriv") ? ["setpriv", "--pdeathsig", "SIGKILL"] : [];

export interface StartOptions {
  dataDir?: string;
  env?: Record<string, string | undefined>;
  /** Command after the entry point (default "serve"). */
  args?: string[];
  /** A command the server runs under (e.g. `prlimit --nofile=1024:1024`). */
  wrap?: string[];
}

/** A real Kura process on a random loopback port with its own data directory. */
export class KuraServer {
  base = "";
  logs = "";
  exitCode: number | null = null;
  private constructor(
    readonly proc: ReturnType<typeof Bun.spawn>,
    readonly dataDir: string,
    private readonly ownsDataDir: boolean,
  ) {}

  static async start(opts: StartOptions = {}): Promise<KuraServer> {
    const ownsDataDir = !opts.dataDir;
    const dataDir = opts.dataDir ?? mkdtempSync(join(tmpdir(), "kura-test-"));
    const env: Record<string, string> = {};
    for (const [k, v] of Object.entries({ ...process.env, KURA_LISTEN: "127.0.0.1:0", KURA_DATA_DIR: dataDir, ...opts.env })) {
      if (v !== undefined) env[k] = v;
    }
    const proc = Bun.spawn([...DIE_WITH_PARENT, ...(opts.wrap ?? []), "bun", "run", join(ROOT, "src/main.ts"), ...(opts.args ?? ["serve"])], {
      cwd: dataDir,
      env,
      stdout: "pipe",
      stderr: "pipe",
    });
    const server = new KuraServer(proc, dataDir, ownsDataDir);
    server.pump();
    const ok = await server.waitForLog(/msg="Kura 启动完成".*listen=(\S+)/, READY_WAIT_MS).catch(() => undefined);
    if (!ok) {
      // A server that hangs before it is ready is killed: waiting for its exit alone hung the test until
      // its hook timed out, with neither the cause nor the server's log in the report.
      const hung = proc.exitCode === null;
      if (hung) proc.kill("SIGKILL");
      await proc.exited;
      throw new Error(`server did not start (${hung ? `not ready within ${READY_WAIT_MS / 1000} s, killed` : `exit ${proc.exitCode}`}):\n${server.logs}`);
    }
    server.base = `http://${ok[1]}`;
    return server;
  }

  private async pump() {
    const decoder = new TextDecoder();
    const read = async (stream: ReadableStream<Uint8Array>) => {
      for await (const chunk of stream) this.logs += decoder.decode(chunk, { stream: true });
    };
    await Promise.all([read(this.proc.stderr as ReadableStream<Uint8Array>), read(this.proc.stdout as ReadableStream<Uint8Array>)]);
  }

  async waitForLog(pattern: RegExp, timeoutMs = 10_000): Promise<RegExpMatchArray> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const m = this.logs.match(pattern);
      if (m) return m;
      if (Date.now() > deadline || this.proc.exitCode !== null) throw new Error(`log line ${pattern} not seen:\n${this.logs}`);
      await Bun.sleep(20);
    }
  }

  /** The factory default password most recently logged for a user. */
  defaultPassword(name = "admin"): string {
    const all = [...this.logs.matchAll(new RegExp(`user=${name} password=(\\S+)`, "g"))];
    if (!all.length) throw new Error(`no default password logged for ${name}`);
    return all.at(-1)![1]!;
  }

  url(path: string): string {
    return this.base + path;
  }

  /**
   * Sends `signal` and waits for the exit. A server still running 30 s later (its shutdown takes well under
   * 10 s: deploy/shutdown-grace) is killed, and the stop fails with its log: waiting alone would end the test
   * in a bare hook timeout, with nothing to show what the shutdown was waiting for.
   */
  async stop(signal: NodeJS.Signals = "SIGTERM"): Promise<number> {
    if (this.proc.exitCode === null) this.proc.kill(signal);
    let timer: ReturnType<typeof setTimeout> | undefined;
    const code = await Promise.race([this.proc.exited, new Promise<null>((resolve) => (timer = setTimeout(() => resolve(null), STOP_GRACE_MS)))]);
    clearTimeout(timer);
    if (code !== null) return code;
    this.proc.kill("SIGKILL");
    await this.proc.exited;
    throw new Error(`server did not stop within ${STOP_GRACE_MS / 1000} s of ${signal}, killed:\n${this.logs.slice(-8000)}`);
  }

  async dispose() {
    await this.stop();
    if (this.ownsDataDir) rmSync(this.dataDir, { recursive: true, force: true });
  }
}

/** Runs the CLI to completion (reset-password, version) and returns exit code and output. */
export async function runCli(args: string[], env: Record<string, string | undefined>) {
  const proc = Bun.spawn(["bun", "run", join(ROOT, "src/main.ts"), ...args], {
    env: Object.fromEntries(Object.entries({ ...process.env, ...env }).filter(([, v]) => v !== undefined)) as Record<string, string>,
    stdout: "pipe",
    stderr: "pipe",
  });
  const [out, err] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text()]);
  return { code: await proc.exited, out, err };
}
