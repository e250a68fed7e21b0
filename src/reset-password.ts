import { ensureBuiltinAdmin, openExistingDataDir, seedDefaultPassword } from "./boot";
import { SessionStore } from "./auth/sessions";
import type { Bootstrap } from "./config/bootstrap";
import { log } from "./ops/log";
import { BUILTIN_ADMIN_NAME, UserRepo } from "./users/repo";

/** `kura reset-password [name]`: re-seeds the factory default password and ends the user's sessions. */
export async function resetPassword(boot: Bootstrap, name = BUILTIN_ADMIN_NAME): Promise<number> {
  const opened = openExistingDataDir(boot, log);
  if (typeof opened === "number") return opened;
  const { db, key } = opened;
  try {
    await ensureBuiltinAdmin(db, log);
    const users = new UserRepo(db);
    const user = users.byName(name);
    if (!user) {
      log.error("用户不存在", { user: name });
      return 1;
    }
    await seedDefaultPassword(users, user.id, log);
    new SessionStore(db, key).deleteAllForUser(user.id);
    return 0;
  } finally {
    db.close();
  }
}
