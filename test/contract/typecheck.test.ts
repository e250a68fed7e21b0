import { expect, test } from "bun:test";
import { resolve } from "node:path";

test("the whole project type-checks under TypeScript strict", async () => {
  const root = resolve(import.meta.dir, "../..");
  const proc = Bun.spawn([resolve(root, "node_modules/.bin/tsc"), "--noEmit", "-p", root], { cwd: root, stdout: "pipe", stderr: "pipe" });
  const out = (await new Response(proc.stdout).text()) + (await new Response(proc.stderr).text());
  expect(out.trim()).toBe("");
  expect(await proc.exited).toBe(0);
}, 120_000);
