// Recording an upload in the database, in-process: JS-thread CPU per storeReference on the real
// application context (SQLite file, group commit, intents, rollups, indexes) with a channel whose
// writes cost nothing, 8 in flight. One pair still varies by up to ±20 % on this VM, but the median
// of 8 pairs holds to ~5 % (an A/A run: 0.75-1.21, median 1.02), where the HTTP upload bench swings
// by 2x; so it is the tool for judging a data-layer change. Each measurement runs in a
// fresh process, alternated with the reference: the least SQL an upload needs (a blob row and an
// image row), or with --against, another checkout's storeReference (before/after a change).
//
//   bun run bench/store.ts [--n 6000] [--pairs 8] [--against ../other-checkout] [--json]
import { join } from "node:path";
import { flagValue, hasFlag, intFlag } from "./lib/args";
import { machineSummary } from "./lib/machine";

const argv = process.argv.slice(2);
const n = intFlag(argv, "n", 6000);
const pairs = intFlag(argv, "pairs", 8);
const against = flagValue(argv, "against");
const ROOT = join(import.meta.dir, "..");
const PROBE = join(import.meta.dir, "lib/store-probe.ts");

function probe(root: string): number {
  const out = Bun.spawnSync(["bun", PROBE, root, String(n)], { stderr: "inherit" });
  if (out.exitCode !== 0) throw new Error(`测量进程失败（${root}），退出码 ${out.exitCode}`);
  return (JSON.parse(out.stdout.toString().trim().split("\n").at(-1)!) as { us: number }).us;
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const reference = against ?? "floor";
const kura: number[] = [];
const ref: number[] = [];
const ratios: number[] = [];
for (let i = 0; i < pairs; i++) {
  // Swap the order every pair, so drift in machine speed does not favour one side.
  let a: number;
  let b: number;
  if (i % 2 === 0) {
    a = probe(ROOT);
    b = probe(reference);
  } else {
    b = probe(reference);
    a = probe(ROOT);
  }
  kura.push(a);
  ref.push(b);
  ratios.push(a / b);
  console.log(`pair ${i + 1}: this checkout ${a.toFixed(1)} µs, ${reference} ${b.toFixed(1)} µs, ratio ${(a / b).toFixed(2)}`);
}
console.log(`\n${machineSummary()}`);
console.log(
  `JS-thread CPU per stored reference (${n} per run, 8 in flight): this checkout median ${median(kura).toFixed(1)} µs, ${reference} ${median(ref).toFixed(1)} µs`,
);
console.log(`ratio (this / ${reference}, lower is cheaper): median ${median(ratios).toFixed(2)} (${ratios.map((r) => r.toFixed(2)).join(", ")})`);
if (hasFlag(argv, "json")) console.log(JSON.stringify({ n, pairs, reference, kura, ref, ratios, median_ratio: median(ratios) }));
