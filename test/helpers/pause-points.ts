/**
 * The test side of src/testing/hold-points.ts. A server started with `env(...)` parks a call at a named
 * point once the test has armed it: a file named after the point holds a filter, and the first call
 * whose detail contains it renames the file to `<point>.held` and waits while that file exists.
 * Races are staged this way instead of hoped for.
 */
import { afterAll } from "bun:test";
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

export class PausePoints {
  readonly dir = mkdtempSync(join(tmpdir(), "kura-pause-"));

  /** Call at a test file's top level: the directory goes when the file's tests are done. */
  constructor() {
    afterAll(() => rmSync(this.dir, { recursive: true, force: true }));
  }

  /** The server's environment enabling these points (pause points and log marks alike). */
  env(...points: string[]): Record<string, string> {
    return { KURA_TEST_HOOKS: points.join(","), KURA_TEST_PAUSE_DIR: this.dir };
  }

  /** The next call at `point` whose detail contains `filter` (any call: "") will park there. */
  arm(point: string, filter = ""): void {
    writeFileSync(join(this.dir, point), filter);
  }

  /** Whether a call is parked at `point` now. */
  isHeld(point: string): boolean {
    return existsSync(`${join(this.dir, point)}.held`);
  }

  /** Waits until a call is parked at `point`; throws after `ms`. */
  async held(point: string, ms = 20_000): Promise<void> {
    const deadline = Date.now() + ms;
    while (!this.isHeld(point)) {
      if (Date.now() > deadline) throw new Error(`no call paused at ${point} within ${ms} ms`);
      await Bun.sleep(25);
    }
  }

  /** Lets the parked call go on, and disarms the point if no call took it. */
  release(point: string): void {
    rmSync(join(this.dir, point), { force: true });
    rmSync(`${join(this.dir, point)}.held`, { force: true });
  }

  /** Starts `run` parked at `point` (the first call whose detail contains `filter`), runs `meanwhile`, then releases it. */
  async during<T>(point: string, filter: string, run: () => Promise<T>, meanwhile: () => Promise<void>): Promise<T> {
    this.arm(point, filter);
    let pending: Promise<T> | undefined;
    try {
      pending = run();
      await this.held(point);
      await meanwhile();
    } finally {
      this.release(point);
    }
    return pending;
  }
}
