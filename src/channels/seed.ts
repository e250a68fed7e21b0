import { isAbsolute, resolve } from "node:path";
import type { AppContext } from "../context";
import { readMeta, writeMeta } from "../db/meta";

/** The default channel's `path`, relative to the data directory so the directory can be moved. */
export const DEFAULT_STORAGE_PATH = "storage";

const SEEDED_FLAG = "default_channel_seeded";

/**
 * First start: a local-disk channel named `local` under <data_dir>/storage, so the
 * service works with zero configuration. Seeded once (a meta flag), so deleting it
 * later is respected.
 */
export async function seedDefaultChannel(app: AppContext) {
  if (readMeta(app.db, SEEDED_FLAG) !== undefined) return;
  app.db.transaction(() => {
    if (!app.channels.repo.any()) {
      app.channels.repo.insert({ name: "local", driver: "local", secrets: { config: { path: DEFAULT_STORAGE_PATH } }, healthy: true });
    }
    writeMeta(app.db, SEEDED_FLAG, "1");
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
