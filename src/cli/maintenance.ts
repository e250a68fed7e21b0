import { createAppContext } from "../app-context";
import { MigrationPendingError, openExistingDataDir, requireExistingDatabase, StartupError } from "../boot";
import type { Bootstrap } from "../config/bootstrap";
import type { AppContext } from "../context";
import { DataDirError, DataDirLockedError, lockDataDir } from "../datadir/lock";
import { log } from "../ops/log";

/**
 * Opens the service's existing data directory for a one-shot command (backup, check):
 * never creates one, and takes the instance lock, because building the context undoes
 * crash leftovers (staged uploads, upload intents) that a running service still owns.
 * Never migrates an older schema (the installed service may still be the old binary): `check`
 * (`pending: "report"`) gets the MigrationPendingError back to report on the file read-only,
 * other commands exit 1 with its message. Returns an exit code when the directory cannot be used.
 */
export async function openForMaintenance(boot: Bootstrap, command: string): Promise<AppContext | number>;
export async function openForMaintenance(boot: Bootstrap, command: string, pending: "report"): Promise<AppContext | MigrationPendingError | number>;
export async function openForMaintenance(
  boot: Bootstrap,
  command: string,
  pending: "refuse" | "report" = "refuse",
): Promise<AppContext | MigrationPendingError | number> {
  try {
    requireExistingDatabase(boot);
    lockDataDir(boot.dataDir);
  } catch (err) {
    if (err instanceof DataDirLockedError) {
      log.error(`kura ${command} 需要先停止服务`, { err: err.message });
      return 1;
    }
    if (err instanceof StartupError || err instanceof DataDirError) {
      log.error("无法打开数据目录", { err: err.message });
      return 1;
    }
    throw err;
  }
  let opened;
  try {
    opened = openExistingDataDir(boot, log, pending === "report" ? { migrate: false, rethrowPending: true } : { migrate: false });
  } catch (err) {
    if (err instanceof MigrationPendingError) return err;
    throw err;
  }
  if (typeof opened === "number") return opened;
  return createAppContext(boot, opened.db, opened.key, log, () => {});
}
