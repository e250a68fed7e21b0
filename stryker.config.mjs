// StrykerJS for `bun run mutate` (test/mutation/run.ts); one module per run, chosen by KURA_MUTATE_MODULE.
import { MODULES, testCommand } from "./test/mutation/modules.ts";

const name = process.env.KURA_MUTATE_MODULE;
const module = MODULES[name];
if (!module) throw new Error(`KURA_MUTATE_MODULE must be one of: ${Object.keys(MODULES).join(", ")}`);

export default {
  testRunner: "command",
  commandRunner: { command: testCommand(module.tests) },
  coverageAnalysis: "off",
  mutate: module.mutate,
  // Tests start real servers: two at a time is what a shared 2-core machine takes.
  concurrency: Number(process.env.KURA_MUTATE_CONCURRENCY ?? 2),
  timeoutFactor: 1.5,
  timeoutMS: 10_000,
  reporters: ["clear-text", "progress", "json"],
  jsonReporter: { fileName: `reports/mutation/${name}.json` },
  clearTextReporter: { allowColor: false, logTests: false, reportMutants: true },
  tempDirName: `.stryker-tmp/${name}`,
  // Stryker would rewrite tsconfig.json with the TypeScript JS API, which TypeScript 7 (native) no
  // longer ships; Bun runs the TypeScript directly and needs no rewritten project references.
  tsconfigFile: "stryker-no-tsconfig.json",
  ignorePatterns: ["reports", "dist", "bench", ".tmp", "data"],
  cleanTempDir: true,
  plugins: [],
};
