import { createAppContext } from "../app-context";
import { openExistingDataDir, requireExistingDatabase, StartupError } from "../boot";
import type { Bootstrap } from "../config/bootstrap";
import type { AppContext } from "../context";
import { DataDirError, DataDirLockedError, lockDataDir } from "../datadir/lock";
import { log } from "../ops/log";

/**
 * Opens the service's existing data directory for a one-shot command (backup, check):
 * never creates one, and takes the instance lock, because building the context undoes
 * crash leftovers (staged uploads, upload intents) that a running service still owns.
 * Returns an exit code when the directory cannot be used.
 */
export async function openForMaintenance(boot: Bootstrap, command: string): Promise<AppContext | number> {
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
  const opened = openExistingDataDir(boot, log);
  if (typeof opened === "number") return opened;
  return createAppContext(boot, opened.db, opened.key, log, () => {});
}
