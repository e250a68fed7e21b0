/**
 * Runs a local-driver probe in a separate process as the unprivileged user `nobody` (setpriv), so
 * permission checks are real even when the suite itself runs as root (as it does in CI, where root
 * would bypass a read-only directory and a chmod-based test could only be skipped).
 */
import { join, resolve } from "node:path";

const DRIVER = join(resolve(import.meta.dir, "../.."), "src/channels/drivers/local.ts");
const SCRIPT = `
const { createLocalDriver } = await import(${JSON.stringify(DRIVER)});
try {
  await createLocalDriver({ path: process.argv[1] }).probe(false);
  console.log(JSON.stringify({ ok: true }));
} catch (err) {
  console.log(JSON.stringify({ ok: false, message: err.message }));
}`;

export const NOBODY = { uid: 65534, gid: 65534 };

/** The probe's outcome when `nobody` probes `base` (setpriv from util-linux; the caller must be root). */
export async function probeAsNobody(base: string): Promise<{ ok: boolean; message?: string }> {
  const proc = Bun.spawn(
    ["setpriv", `--reuid=${NOBODY.uid}`, `--regid=${NOBODY.gid}`, "--clear-groups", "bun", "-e", SCRIPT, base],
    // No transpiler cache and a HOME nobody can use: the root-owned ones are not writable for it.
    { env: { ...process.env, HOME: "/tmp", BUN_RUNTIME_TRANSPILER_CACHE_PATH: "0" }, stdout: "pipe", stderr: "pipe" },
  );
  const [out, err, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
  if (code !== 0) throw new Error(`probe as nobody failed to run (exit ${code}): ${err}`);
  return JSON.parse(out.trim().split("\n").at(-1)!);
}
