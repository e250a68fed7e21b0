import { expect, test } from "bun:test";
import { join, resolve } from "node:path";
import { lint } from "../../scripts/lint";

const ROOT = resolve(import.meta.dir, "../..");

// The project's lint (rules in scripts/lint.ts) runs with the suite, so CI enforces it.
test("src passes scripts/lint.ts (fix the import style with `bun scripts/lint.ts --fix`)", () => {
  expect(lint().map((f) => `${f.file}:${f.line} [${f.rule}] ${f.message}`)).toEqual([]);
});

// Biome (biome.jsonc): its recommended lint rules and one formatting, over src, test, bench and scripts.
// `bun run format` rewrites the files; `biome ci` only checks and fails on any difference.
test("biome ci passes (lint and format; fix with `bun run format`)", () => {
  const run = Bun.spawnSync([join(ROOT, "node_modules/.bin/biome"), "ci", "--reporter=summary", "--colors=off", "."], {
    cwd: ROOT,
    stdout: "pipe",
    stderr: "pipe",
  });
  const output = `${run.stdout.toString()}${run.stderr.toString()}`;
  expect(run.exitCode, output).toBe(0);
}, 60_000);
