import { isAbsolute, resolve } from "node:path";
import type { AppContext } from "../context";

/** The default channel's `path`, relative to the data directory so the directory can be moved. */
export const DEFAULT_STORAGE_PATH = "storage";

/**
 * First start: a local-disk channel named `local` under <data_dir>/storage, so the
 * service works with zero configuration. Seeded once (a meta flag), so deleting it
 * later is respected.
 */
export async function seedDefaultChannel(app: AppContext) {
  const seeded = app.db.query("SELECT 1 FROM meta WHERE key = 'default_channel_seeded'").get();
  if (seeded) return;
  app.db.transaction(() => {
    const exists = app.db.query("SELECT 1 FROM channels LIMIT 1").get();
    if (!exists) {
      app.channels.repo.insert({ name: "local", driver: "local", secrets: { config: { path: DEFAULT_STORAGE_PATH } }, healthy: true });
    }
    app.db.query("INSERT INTO meta (key, value) VALUES ('default_channel_seeded', '1')").run();
  })();
  app.log.info("已创建默认本地存储渠道", { channel: "local", path: app.paths.storage });
}

/**
 * Older versions stored the default channel's absolute path. A local channel pointing
 * exactly at <data_dir>/storage is rewritten to the relative form (the config is sealed
 * with the master key, so this runs in code, not in an SQL migration). Idempotent.
 */
export function relativizeDefaultChannel(app: AppContext) {
  const storage = resolve(app.paths.storage);
  for (const row of app.channels.repo.all()) {
    if (row.driver !== "local") continue;
    const secrets = app.channels.repo.secrets(row);
    const path = secrets.config.path?.trim();
    if (!path || !isAbsolute(path) || resolve(path) !== storage) continue;
    secrets.config.path = DEFAULT_STORAGE_PATH;
    if (secrets.inputs && Object.hasOwn(secrets.inputs, "path")) secrets.inputs.path = DEFAULT_STORAGE_PATH;
    app.channels.repo.replaceSecrets(row.id, secrets);
    app.log.info("本地存储渠道路径已改为相对数据目录", { channel: row.name, path: DEFAULT_STORAGE_PATH });
  }
}
