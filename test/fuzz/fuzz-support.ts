import { expect } from "bun:test";
import fc from "fast-check";

/**
 * Shared knobs of the fuzz tier. `bun run test` runs every property with a fixed seed and
 * FUZZ_RUNS iterations (small, so the whole tier stays well under a minute on a loaded
 * 2-core machine); `bun run fuzz` raises FUZZ_RUNS. A failure prints fast-check's seed and
 * counterexample path, so `FUZZ_SEED=<seed>` reproduces it.
 */
export const FUZZ_RUNS = Math.max(1, Number(process.env.FUZZ_RUNS ?? 40));
export const FUZZ_SEED = Number(process.env.FUZZ_SEED ?? 0x6b757261); // "kura"

/** fast-check parameters; `scale` lets cheap properties run more often than costly ones. */
export function fuzzParams(scale = 1) {
  return { seed: FUZZ_SEED, numRuns: Math.max(1, Math.round(FUZZ_RUNS * scale)), endOnFailure: true };
}

/**
 * How long one synchronous parser call may hold the event loop. The contract says 50 ms for a
 * whole request; a pure parser call gets the same budget. This machine is shared by several
 * test runs on 2 cores, so a single measurement can include time the process was not even
 * scheduled: a call over budget is repeated and only its fastest run counts. Real
 * super-linear work (a quadratic regex on a 100 KiB body takes seconds) still fails.
 */
export const PARSER_BLOCK_MS = 50;

/**
 * Runs `fn`, returning its outcome and the fastest of up to three timings once over budget. Each timing is
 * the lesser of the wall time and the process's CPU time over the call: a process not scheduled for a while
 * (CI's busy cores once held a 3 ms call past 50 ms three times running) spends no CPU meanwhile, while real
 * super-linear work spends both.
 */
export function timedCall<T>(fn: () => T): { value?: T; error?: unknown; ms: number } {
  let best = Number.POSITIVE_INFINITY;
  let outcome: { value?: T; error?: unknown } = {};
  for (let attempt = 0; attempt < 3; attempt++) {
    const started = performance.now();
    const cpuBefore = process.cpuUsage();
    try {
      outcome = { value: fn() };
    } catch (error) {
      outcome = { error };
    }
    const cpu = process.cpuUsage(cpuBefore);
    best = Math.min(best, performance.now() - started, (cpu.user + cpu.system) / 1000);
    if (best <= PARSER_BLOCK_MS) break;
  }
  return { ...outcome, ms: best };
}

/** True when `text` contains Chinese (user-facing messages must be in Chinese). */
export const hasChinese = (text: string) => /[\u4e00-\u9fff]/.test(text);

/** Hostile building blocks for text inputs: delimiters, escapes, unterminated constructs. */
export const HOSTILE_TOKENS = [
  "%",
  "%E0%A4%A",
  "%zz",
  "%00",
  "\u0000",
  "\r\n",
  "\n",
  ";",
  "=",
  ",",
  "&",
  "?",
  "#",
  "/",
  "//",
  "..",
  "\\",
  "<",
  ">",
  "<!--",
  "-->",
  "<?xml",
  "?>",
  "<![CDATA[",
  "]]>",
  "&amp;",
  "&#x",
  "&#99999999;",
  '"',
  "'",
  " ",
  "\t",
  "*",
  "*.",
  "[",
  "]",
  ":",
  "@",
  "+",
  "-",
  "0",
  "-1",
  "1e999",
  "NaN",
  "9007199254740993",
  "ü",
  "💥",
  "\ud800",
];

/** Strings an attacker would send: random text, hostile tokens, and one token amplified (up to ~400 KB). */
export const hostileString = fc.oneof(
  fc.string({ maxLength: 200 }),
  fc.string({ unit: "binary", maxLength: 200 }),
  fc.array(fc.oneof(fc.constantFrom(...HOSTILE_TOKENS), fc.string({ maxLength: 8 })), { maxLength: 60 }).map((p) => p.join("")),
  fc.tuple(fc.constantFrom(...HOSTILE_TOKENS), fc.integer({ min: 1_000, max: 40_000 })).map(([t, n]) => t.repeat(n)),
);

/**
 * Runs a parser call that must either return or throw an error `allowed` accepts (with a Chinese
 * message), within PARSER_BLOCK_MS; anything else fails the property.
 */
export function expectContained<T>(fn: () => T, allowed: (err: unknown) => boolean): T | undefined {
  const r = timedCall(fn);
  if (r.ms > PARSER_BLOCK_MS) throw new Error(`parser held the event loop for ${r.ms.toFixed(1)} ms`);
  if ("error" in r && r.error !== undefined) {
    if (!allowed(r.error)) throw r.error;
    expect(hasChinese((r.error as Error).message)).toBe(true);
    return undefined;
  }
  return r.value;
}
