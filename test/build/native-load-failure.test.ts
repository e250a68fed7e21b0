// The single-file executable where its native image library cannot be unpacked or loaded: one
// logfmt line saying what to set, never a source excerpt with a stack trace; and a cache
// directory it had to skip is named when a later one is used.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdirSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const ROOT = join(import.meta.dir, "..", "..");
let work: string;
let binary: string;

beforeAll(async () => {
  work = mkdtempSync(join(tmpdir(), "kura-native-fail-"));
  binary = join(work, "kura");
  const build = Bun.spawn([process.execPath, "run", "build.ts", "--outfile", binary], { cwd: ROOT, stdout: "pipe", stderr: "pipe" });
  const [out, err, code] = await Promise.all([new Response(build.stdout).text(), new Response(build.stderr).text(), build.exited]);
  if (code !== 0) throw new Error(`build.ts failed (${code}):\n${out}\n${err}`);
}, 240_000);

afterAll(() => {
  if (work) rmSync(work, { recursive: true, force: true });
});

async function run(args: string[], env: Record<string, string>) {
  const proc = Bun.spawn([binary, ...args], { cwd: work, env: { PATH: "/usr/bin:/bin", ...env }, stdout: "pipe", stderr: "pipe" });
  const [out, err, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
  return { out, err, code };
}

/** Every candidate cache directory fails (ENOTDIR below /dev/null), as on a host whose caches are all noexec. */
const NOWHERE = { HOME: "/dev/null", TMPDIR: "/dev/null" };

describe("the embedded sharp addon cannot be loaded", () => {
  test.each([
    ["selftest", "msg=命令失败 command=selftest"],
    ["serve", "msg=启动失败"],
  ])(
    "kura %s ends with one line naming KURA_NATIVE_DIR, exit 1",
    async (command, msg) => {
      const dataDir = join(work, `data-${command}`);
      mkdirSync(dataDir);
      const r = await run([command], { ...NOWHERE, KURA_DATA_DIR: dataDir, KURA_LISTEN: "127.0.0.1:0" });
      expect(r.code).toBe(1);
      expect(r.out).toBe("");
      const lines = r.err.trim().split("\n");
      expect(lines).toHaveLength(1);
      expect(lines[0]).toMatch(
        new RegExp(
          `^time=\\S+ level=ERROR ${msg} err="无法加载内嵌的 sharp 原生模块（linux-x64）。可设置 KURA_NATIVE_DIR 指定一个可写且允许执行的目录。/dev/null/\\.cache/kura: ENOTDIR`,
        ),
      );
      expect(readdirSync(dataDir)).toEqual([]);
    },
    60_000,
  );

  test("a KURA_NATIVE_DIR that cannot be used is named when the next directory is used instead", async () => {
    const home = join(work, "home");
    mkdirSync(home);
    const r = await run(["selftest"], { HOME: home, KURA_NATIVE_DIR: "/dev/null/kura" });
    expect(r.code).toBe(0);
    expect(JSON.parse(r.out).ok).toBe(true);
    expect(r.err).toContain(`level=INFO msg="已从备用目录加载 sharp 原生模块" dir=${join(home, ".cache", "kura")} skipped="/dev/null/kura: ENOTDIR`);
  }, 60_000);
});
