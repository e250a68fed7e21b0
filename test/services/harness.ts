import { afterEach, beforeEach } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { AppContext } from "../../src/context";
import { runUpload, type UploadOptions, type UploadOutcome } from "../../src/images/upload/service";
import type { UserRow } from "../../src/users/repo";
import { openContext } from "../helpers/context";

/**
 * The real application context in this process, over a fresh data dir: services are
 * called as plain functions, no server is spawned. The built-in admin is the actor.
 */
export async function serviceContext(): Promise<{ app: AppContext; admin: UserRow; dataDir: string; dispose: () => void }> {
  const dataDir = mkdtempSync(join(tmpdir(), "kura-service-"));
  const { app, close } = await openContext(dataDir);
  const admin = app.users.byName("admin")!;
  return {
    app,
    admin,
    dataDir,
    dispose: () => {
      close();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

export type ServiceContext = Awaited<ReturnType<typeof serviceContext>>;

/** A fresh serviceContext() for every test of the file, disposed after it; `open` hands it to the file's variables. */
export function serviceContextPerTest(open: (ctx: ServiceContext) => void): void {
  let dispose = () => {};
  beforeEach(async () => {
    const ctx = await serviceContext();
    dispose = ctx.dispose;
    open(ctx);
  });
  afterEach(() => dispose());
}

let staged = 0;

/** One upload through the same pipeline every surface uses, from bytes staged in tmp like a receiver would. */
export async function uploadBytes(
  app: AppContext,
  userId: string,
  bytes: Buffer,
  options: UploadOptions = {},
  idempotencyKey?: string,
): Promise<UploadOutcome> {
  const path = join(app.paths.tmp, `service-test-${++staged}`);
  await Bun.write(path, bytes);
  return runUpload(app, app.uploadGate, {
    userId,
    tokenId: null,
    idempotencyKey,
    receive: async () => ({ file: { path, size: bytes.length, fileName: "photo.jpg" }, options }),
  });
}

/** The error a call threw (failing the test when it did not throw). */
export async function thrown(run: () => unknown): Promise<unknown> {
  try {
    await run();
  } catch (err) {
    return err;
  }
  throw new Error("expected the call to throw");
}
