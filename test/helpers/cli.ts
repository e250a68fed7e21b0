import { lstatSync, readdirSync } from "node:fs";
import { join, resolve } from "node:path";

const ROOT = resolve(import.meta.dir, "../..");

export interface CliRun {
  code: number;
  out: string;
  err: string;
}

/**
 * Runs `kura ARGS` from source in `cwd`, with `env` over the test's own environment (KURA_DATA_DIR
 * unset unless given) and `prefix` before `bun` (e.g. setpriv). Killed after `timeoutMs`: a command
 * that should have been refused may otherwise start a server and never end.
 */
export async function runKuraIn(
  cwd: string,
  args: string[],
  env: Record<string, string | undefined> = {},
  prefix: string[] = [],
  timeoutMs = 30_000,
): Promise<CliRun> {
  const merged: Record<string, string> = {};
  for (const [k, v] of Object.entries({ ...process.env, KURA_DATA_DIR: undefined, KURA_LISTEN: "127.0.0.1:0", ...env })) {
    if (v !== undefined) merged[k] = v;
  }
  const proc = Bun.spawn([...prefix, process.execPath, "run", join(ROOT, "src/main.ts"), ...args], { cwd, env: merged, stdout: "pipe", stderr: "pipe" });
  const timer = setTimeout(() => proc.kill("SIGKILL"), timeoutMs);
  try {
    const [out, err] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text()]);
    return { code: await proc.exited, out, err };
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Every entry below `dir` (itself included) with its type, size, mode, owner and mtime: two equal
 * states mean nothing was created, removed, written, chmodded or chowned in between.
 */
export function treeState(dir: string): Record<string, string> {
  const out: Record<string, string> = {};
  const walk = (path: string, rel: string) => {
    const st = lstatSync(path);
    out[rel] = `${st.isDirectory() ? "d" : "f"} ${st.size} ${(st.mode & 0o7777).toString(8)} ${st.uid}:${st.gid} ${st.mtimeMs}`;
    if (st.isDirectory()) for (const name of readdirSync(path).sort()) walk(join(path, name), `${rel}/${name}`);
  };
  walk(dir, ".");
  return out;
}
