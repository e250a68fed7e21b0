/**
 * TEST-ONLY hold points for the deterministic crash tests (test/http/crash.test.ts).
 *
 * Inert unless the environment variable KURA_TEST_HOOKS lists a point by name (comma-separated);
 * production never sets it, and then `holdAt` returns undefined without doing anything. A held call
 * writes one line to stderr and never resumes, so a test can SIGKILL the process at exactly that
 * point of an upload instead of guessing with a sleep.
 */
export type HoldPoint =
  /** Bytes written to the synchronous channels (intent rows exist), blob/image rows not committed yet. */
  | "upload.before-commit"
  /** Upload committed, a replication job about to copy the blob to another channel. */
  | "replicate.before-put";

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
