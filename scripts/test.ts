/**
 * `bun run test`: the whole suite, in two groups, as one command (CI runs it through `.ci/run`).
 *
 * 1. Parallel group: every test file except SERIAL, in PARALLEL worker processes (`bun test --parallel`).
 *    Most files spend their time waiting on real servers and peers (Kura, rclone, sshd, Apache, nginx,
 *    Caddy, Chromium) and on I/O, so several at once fit even on 2 cores. `--no-isolate`: a worker keeps
 *    one module registry across its files, as the single-process `bun test` always did, instead of
 *    loading the helpers again per file (parsing openapi.yaml for the response checks alone costs
 *    ~0.35 s of CPU; isolated, the suite took ~25 % more CPU).
 *    `test/timings.json` (per-file durations) makes the slowest files start first, so no long file is
 *    left alone at the end.
 * 2. Serial group: SERIAL, one file at a time in one process, after the parallel group is done. These
 *    files assert wall time, CPU or memory budgets, which measure the code only on a quiet machine.
 *
 * A file is parallel-safe when it takes a random port (port 0, or a probe right before the bind), a
 * private temp directory (mkdtemp) and no fixed path outside it; test/README.md lists the rules.
 *
 *   bun run test                           both groups (the exit code fails if either fails)
 *   bun run test --update-timings          same, then rewrites test/timings.json from this run
 *   bun run test test/http/auth.test.ts    any other arguments: plain `bun test --timeout 60000 <args>`
 *   KURA_TEST_PARALLEL=2 bun run test      fewer (or more) workers than the default 4
 */
import { resolve } from "node:path";

const ROOT = resolve(import.meta.dir, "..");
const TIMEOUT = "--timeout=60000";
const TIMINGS = "test/timings.json";
/** Workers: the files mostly wait, so more than the 2 cores pay off; 4 measured best on a loaded 2-core machine. */
const PARALLEL = Number(process.env.KURA_TEST_PARALLEL ?? 4);

/** Files that run alone after the parallel group, and why each cannot share the machine. */
export const SERIAL: Record<string, string> = {
  "test/fault/hung-peer.test.ts": "failover within a wall-time budget (FAILOVER_BUDGET_MS)",
  "test/http/cdn-purge.test.ts": "a delete answers within 1 s while the purge fails",
  "test/http/memory-budget.test.ts": "peak RSS of 4 concurrent 36 MP renders; CPU starvation makes them overlap more",
  "test/http/upload-memory.test.ts": "RSS growth while a 1 GiB body streams in",
  "test/http/hardening-body-cap.test.ts": "RSS growth while oversized bodies stream in",
  "test/http/chevereto-memory.test.ts": "peak RSS of 8 parallel 54 MB unauthenticated Chevereto urlencoded bodies",
  "test/scale/dedup-idle-round.test.ts": "an idle dedup round under 100 ms",
  "test/scale/dedup-burst.test.ts": "the longest event-loop pause of a dedup round over 600 near-identical blobs stays under an eighth of it",
  "test/scale/dedup-worker-pause.test.ts": "the longest event-loop pause of a dedup round over 250k indexed hashes stays under half the round",
  "test/scale/batch-delete-slices.test.ts": "the longest event-loop pause of a 100-image batch delete stays under a third of it",
  "test/scale/s3-delete-objects-slices.test.ts": "the longest event-loop pause of an S3 DeleteObjects of 1,000 keys stays under a third of it",
  "test/scale/image-search-slices.test.ts": "the longest event-loop pause of a search that walks 200k names stays under a third of it",
  "test/scale/user-list.test.ts": "the longest event-loop pause of a Lsky keyword walk over a 150k-image user stays under a third of it",
  "test/scale/cold-rejudge.test.ts": "the longest event-loop pause while 10k images are re-judged cold stays under a fifteenth of the run",
  "test/scale/audit-log-scale.test.ts": "the longest event-loop pause while 200k expired audit entries are pruned stays under a third of it",
  "test/scale/wal-bulk-yield.test.ts": "the longest event-loop pause while ~195 MiB of WAL is written in slices stays under a tenth of the drain",
  "test/scale/delete-retime.test.ts": "the longest event-loop pause while 40k pending deletes are re-timed stays under half the run",
  "test/unit/s3-xml-reader.test.ts": "1 MiB of hostile XML parsed under 100 ms",
  "test/s3/hardening.test.ts": "hostile DeleteObjects bodies refused under 100 ms over HTTP",
  "test/unit/delivery-transform.test.ts": "a 30 ms processing timeout fires within 300 ms",
  "test/clients/picgo-cli.test.ts": "the PicGo CLI exits within 2 s of its upload",
  "test/unit/login-throttle.test.ts": "200,000 throttled attempts under 2 s (no scan of all buckets per attempt)",
};

/** Lines of each failure (its error and the `(fail)` line), repeated at the end: CI logs keep only the tail. */
const failures: string[] = [];
/** How many lines before a `(fail)` line belong to its report (the error, its diff, the source excerpt). */
const CONTEXT_BEFORE = 40;
/** An unhandled error between tests is printed after its banner: that many lines after it are kept. */
const CONTEXT_AFTER_BANNER = 30;

/** Passes one stream of `bun test` through to ours, keeping the lines around each failure to quote them. */
async function relay(stream: ReadableStream<Uint8Array>, out: NodeJS.WriteStream): Promise<void> {
  const recent: string[] = [];
  // The file a failure belongs to: its `path.test.ts:` header may be far above, past passing tests.
  let file = "";
  let following = 0;
  // `bun test` ends with "N tests failed:" and the same `(fail)` lines again, without their errors.
  let summary = false;
  let partial = "";
  const decoder = new TextDecoder();
  for await (const chunk of stream) {
    out.write(chunk);
    const lines = (partial + decoder.decode(chunk, { stream: true })).split("\n");
    partial = lines.pop() ?? "";
    for (const line of lines) {
      if (following > 0) {
        failures.push(line);
        if (--following === 0) failures.push("");
        continue;
      }
      if (/^\d+ tests? failed:/.test(line)) summary = true;
      if (summary) continue;
      if (/\.test\.[jt]sx?:$/.test(line)) file = line;
      // A finished test's lines are not the next failure's context.
      if (/^\((pass|skip|todo)\)/.test(line)) {
        recent.length = 0;
        continue;
      }
      recent.push(line);
      if (recent.length > CONTEXT_BEFORE) recent.shift();
      const failed = line.includes("(fail)");
      if (failed || line.includes("Unhandled error")) {
        if (file && !recent.includes(file)) failures.push(file);
        failures.push(...recent.splice(0));
        if (failed) failures.push("");
        else following = CONTEXT_AFTER_BANNER;
      }
    }
  }
}

async function bunTest(args: string[]): Promise<number> {
  const proc = Bun.spawn([process.execPath, "test", TIMEOUT, ...args], { cwd: ROOT, stdio: ["inherit", "pipe", "pipe"] });
  await Promise.all([relay(proc.stdout, process.stdout), relay(proc.stderr, process.stderr)]);
  return await proc.exited;
}

const args = process.argv.slice(2);
const updateTimings = args.length === 1 && args[0] === "--update-timings";
const repeatFailures = () => failures.length && console.log(`\n— failures, repeated —\n${failures.join("\n")}`);
if (args.length && !updateTimings) {
  const code = await bunTest(args);
  repeatFailures();
  process.exit(code);
}

const serial = Object.keys(SERIAL);
const started = performance.now();
const parallel = await bunTest([
  `--parallel=${PARALLEL}`,
  "--no-isolate",
  `--timings=${TIMINGS}`,
  ...(updateTimings ? ["--update-timings"] : []),
  ...serial.map((file) => `--path-ignore-patterns=${file}`),
]);
const parallelSeconds = (performance.now() - started) / 1000;
console.log(`\n— parallel group (${PARALLEL} workers): ${parallelSeconds.toFixed(0)} s, exit ${parallel}; now ${serial.length} files alone —\n`);
const alone = await bunTest(serial);
const totalSeconds = (performance.now() - started) / 1000;
repeatFailures();
console.log(`\n— suite: parallel group exit ${parallel}, serial group exit ${alone}, ${totalSeconds.toFixed(0)} s in all —`);
process.exit(parallel || alone);
