import { existsSync } from "node:fs";
import { ensureBuiltinAdmin, openExistingDataDir, requireExistingDatabase, seedDefaultPassword, StartupError } from "./boot";
import { SessionStore } from "./auth/sessions";
import type { Bootstrap } from "./config/bootstrap";
import { DataDirError, lockIfFree } from "./datadir/lock";
import { stagedPath } from "./ops/backups";
import { log } from "./ops/log";
import { BUILTIN_ADMIN_ID, BUILTIN_ADMIN_NAME, UserRepo } from "./users/repo";

/**
 * `kura reset-password [name]`: re-seeds the factory default password and ends the user's sessions
 * (without a name: the built-in administrator's, under whatever name it has now).
 * Works beside a running service (one row, through SQLite's own locking), but only the process that
 * holds the data directory's lock swaps in a staged restore; and it never migrates an older schema.
 * Beside a service with a restore staged it refuses: the snapshot replaces the live database at the
 * service's next start, and the password it would print with it.
 */
export async function resetPassword(boot: Bootstrap, name?: string): Promise<number> {
  let lock;
  try {
    requireExistingDatabase(boot);
    lock = lockIfFree(boot.dataDir);
  } catch (err) {
    if (err instanceof StartupError || err instanceof DataDirError) {
      log.error("无法打开数据目录", { err: err.message });
      return 1;
    }
    throw err;
  }
  if (!lock && existsSync(stagedPath(boot.dataDir))) {
    log.error(
      "已暂存待换入的快照：服务下次启动时它会替换当前数据库，现在重设的密码会随之失效。请先重启服务（systemctl restart kura），快照换入后再运行 kura reset-password",
      { staged: stagedPath(boot.dataDir) },
    );
    return 1;
  }
  const opened = openExistingDataDir(boot, log, { ownsDataDir: lock !== undefined, migrate: false });
  if (typeof opened === "number") return opened;
  const { db, key } = opened;
  try {
    await ensureBuiltinAdmin(db, log);
    const users = new UserRepo(db);
    // Without a name: the built-in administrator by its id, whatever it was renamed to. By name, an
    // admin who renamed it and gave "admin" to another account had that account reset (authz audit LOW-4).
    const user = name === undefined ? users.byId(BUILTIN_ADMIN_ID) : users.byName(name);
    if (!user) {
      log.error("用户不存在", { user: name ?? BUILTIN_ADMIN_NAME });
      return 1;
    }
    await seedDefaultPassword(users, user.id, log);
    new SessionStore(db, key).deleteAllForUser(user.id);
    return 0;
  } finally {
    db.close();
    lock?.release();
  }
}
