/**
 * TEST-ONLY hold points for the deterministic crash tests (test/http/crash.test.ts), and pauses and
 * marks for the deterministic race tests (test/s3/multipart-integrity.test.ts).
 *
 * Inert unless the environment variable KURA_TEST_HOOKS lists a point by name (comma-separated);
 * production never sets it, and then `holdAt` returns undefined without doing anything. A held call
 * writes one line to stderr and never resumes, so a test can SIGKILL the process at exactly that
 * point of an upload instead of guessing with a sleep.
 */
import { existsSync, readFileSync, renameSync } from "node:fs";
import { join } from "node:path";

export type HoldPoint =
  /** Bytes written to the synchronous channels (intent rows exist), blob/image rows not committed yet. */
  | "upload.before-commit"
  /** Upload committed, a replication job about to copy the blob to another channel. */
  | "replicate.before-put"
  /** A physical delete that removed the blob's row, before its cached variants and objects (images/jobs.ts). */
  | "blob.after-claim";

const enabled = new Set(
  (process.env.KURA_TEST_HOOKS ?? "")
    .split(",")
    .map((s) => s.trim())
    .filter(Boolean),
);

/**
 * Test-only delays, enabled the same way: "front.apply-late" makes every delivery thread apply
 * the main thread's invalidations 400 ms late, so a test can send requests inside the window a
 * thread has not caught up in (which in production lasts well under a millisecond).
 */
export type DelayPoint = "front.apply-late";

export const delayAt = (point: DelayPoint): number => (enabled.has(point) ? 400 : 0);

export function holdAt(point: HoldPoint, detail: string): Promise<never> | undefined {
  if (!enabled.has(point)) return undefined;
  process.stderr.write(`kura-test-hook held point=${point} ${detail}\n`);
  return new Promise<never>(() => {});
}

/**
 * Test-only pauses: unlike a hold, a paused call resumes, and the test chooses the one call that
 * pauses, so it can park one request at the step a race is about and then send the other. Enabled by
 * KURA_TEST_HOOKS like the rest; the test arms a point by writing the file `<KURA_TEST_PAUSE_DIR>/<point>`,
 * whose text is a filter on the detail (e.g. `op=complete `; empty for any call). The next call to
 * reach the point with a matching detail takes the file (renames it to `<point>.held`), logs
 * `kura-test-hook paused point=… …` and resumes once the test deletes `<point>.held`. Every other
 * call passes straight through.
 */
export type PausePoint =
  /**
   * An S3 multipart request at a step a concurrent request of the same upload could break
   * (s3/ops/multipart.ts): `op=part-receive` before a part's body is received, and, inside the
   * upload's lock, `op=part-commit` between finding the part it replaces and taking its place,
   * `op=complete` between checking the parts and reading them, `op=abort` before the removal.
   */
  | "s3.multipart"
  /** An upload whose bytes are written (intents committed), before its reference's commit (images/store.ts). */
  | "upload.commit"
  /** A replication job that has opened its source, before it writes the copy to the target (images/jobs.ts). */
  | "replicate.put"
  /** A rendered variant about to be written to the disk cache and recorded (delivery/variants.ts). */
  | "variant.store";

export function pauseAt(point: PausePoint, detail: string): Promise<void> | undefined {
  const dir = process.env.KURA_TEST_PAUSE_DIR;
  if (!enabled.has(point) || !dir) return undefined;
  const armed = join(dir, point);
  const held = `${armed}.held`;
  try {
    if (!`${detail} `.includes(readFileSync(armed, "utf8"))) return undefined;
    renameSync(armed, held);
  } catch {
    return undefined; // not armed
  }
  process.stderr.write(`kura-test-hook paused point=${point} ${detail}\n`);
  return (async () => {
    while (existsSync(held)) await Bun.sleep(10);
  })();
}

/**
 * Test-only marks: one log line `kura-test-hook reached point=… …` when a call gets there, so a test
 * waits for that event (a request queued behind another) instead of sleeping.
 */
export type MarkPoint =
  /** A multipart request waits for the lock another request of the same upload holds (s3/multipart-store.ts). */
  | "s3.multipart-queued"
  /** An upload that must write a blob's lost bytes again waits for another upload of the same bytes (images/store.ts). */
  | "upload.rewrite-queued"
  /** A health round (probes, then alerts and webhooks) begins (`phase=begin`) or has ended (`phase=end`) (loops.ts). */
  | "health.round";

export function markAt(point: MarkPoint, detail: string) {
  if (enabled.has(point)) process.stderr.write(`kura-test-hook reached point=${point} ${detail}\n`);
}
