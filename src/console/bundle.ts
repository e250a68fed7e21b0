/**
 * Bundle-time macro (imported `with { type: "macro" }` by src/http/routes/console.ts).
 *
 * Why a macro: the console is written as typed browser modules under ./app, but the server
 * must serve one self-contained page, also from the compiled executable where no source files
 * exist. Bun runs this function while transpiling console.ts (from source: at process start;
 * in `bun run build.ts`: at build time) and inlines the returned string, so the executable
 * carries only the finished script. No bundler runs at request time and nothing is fetched
 * from the network.
 */
import { join } from "node:path";

export function consoleScript(): string {
  const entry = join(import.meta.dir, "app", "main.ts");
  const out = Bun.spawnSync([process.execPath, "build", entry, "--target=browser", "--format=esm", "--minify"], {
    stdout: "pipe",
    stderr: "pipe",
    env: { ...process.env, NO_COLOR: "1" },
  });
  if (!out.success) throw new Error(`控制台脚本打包失败：\n${out.stderr.toString()}`);
  const code = out.stdout.toString();
  // The script is inlined into a <script> element: this sequence would end it early.
  if (/<\/script/i.test(code)) throw new Error("控制台脚本中出现了 </script，无法内联");
  return code;
}
