/**
 * `bun run mutate [module...]`: StrykerJS over the security- and data-critical modules, one module at a
 * time (see modules.ts), then the mutation score per module. Slow and not part of CI.
 * Stryker's CLI runs on Bun here (`bun --bun`): it needs Node ≥ 22, which CI images may not have.
 */
import { existsSync, readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { SHARED_DIR } from "../helpers/shared";
import { MODULES } from "./modules";

const ROOT = resolve(import.meta.dir, "../..");
const chosen = process.argv.slice(2);
const names = chosen.length ? chosen : Object.keys(MODULES);
for (const name of names) if (!(name in MODULES)) throw new Error(`unknown module ${name}; known: ${Object.keys(MODULES).join(", ")}`);

interface Report {
  files: Record<string, { mutants: { status: string }[] }>;
}

/** Stryker's own score: (killed + timeout) / (all mutants that compiled and ran). */
export function score(report: Report) {
  const counts: Record<string, number> = {};
  for (const file of Object.values(report.files)) for (const m of file.mutants) counts[m.status] = (counts[m.status] ?? 0) + 1;
  const detected = (counts.Killed ?? 0) + (counts.Timeout ?? 0);
  const valid = detected + (counts.Survived ?? 0) + (counts.NoCoverage ?? 0);
  return { counts, detected, valid, percent: valid ? (100 * detected) / valid : 100 };
}

const rows: string[] = [];
for (const name of names) {
  console.log(`\n=== mutation testing: ${name} ===`);
  const proc = Bun.spawn(["bun", "--bun", join(ROOT, "node_modules/.bin/stryker"), "run"], {
    cwd: ROOT,
    // The sandbox copy lives deeper than the worktree: point the tests at the shared vectors explicitly.
    env: { ...process.env, KURA_MUTATE_MODULE: name, KURA_SHARED_DIR: SHARED_DIR },
    stdout: "inherit",
    stderr: "inherit",
  });
  const code = await proc.exited;
  const path = join(ROOT, `reports/mutation/${name}.json`);
  if (code !== 0 || !existsSync(path)) {
    rows.push(`${name}: Stryker failed (exit ${code})`);
    continue;
  }
  const s = score(JSON.parse(readFileSync(path, "utf8")) as Report);
  rows.push(`${name}: ${s.percent.toFixed(1)}% killed (${s.detected}/${s.valid}; ${JSON.stringify(s.counts)})`);
}
console.log(`\n=== mutation scores ===\n${rows.join("\n")}`);
