import { createAppContext } from "../../src/app-context";
import { ensureBuiltinAdmin, openDataDir } from "../../src/boot";
import { readBootstrap } from "../../src/config/bootstrap";
import type { AppContext } from "../../src/context";
import type { Logger } from "../../src/ops/log";

/** Log lines captured from an in-process context, for assertions. */
export interface CapturedLog {
  level: string;
  msg: string;
  fields: Record<string, unknown>;
}

/**
 * The real application context, in-process, over an existing or new data dir: for tests
 * of background work (reconciliation, drains) that would otherwise wait for long timers.
 * `admin: false` leaves the built-in admin out (its password hash costs a quarter of a second,
 * paid again by every mutant of a mutation run).
 */
export async function openContext(dataDir: string, opts: { admin?: boolean } = {}): Promise<{ app: AppContext; logs: CapturedLog[]; close: () => void }> {
  const logs: CapturedLog[] = [];
  const capture =
    (level: string) =>
    (msg: string, fields: Record<string, unknown> = {}) =>
      void logs.push({ level, msg, fields });
  const log: Logger = { info: capture("INFO"), warn: capture("WARN"), error: capture("ERROR") };
  const boot = readBootstrap({ KURA_DATA_DIR: dataDir, KURA_LISTEN: "127.0.0.1:0" });
  const { db, key } = openDataDir(boot, log);
  if (opts.admin !== false) await ensureBuiltinAdmin(db, log);
  const app = await createAppContext(boot, db, key, log, () => {});
  return {
    app,
    logs,
    close: () => {
      app.dbLock.dispose();
      db.close();
    },
  };
}
