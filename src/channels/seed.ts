import { existsSync } from "node:fs";
import { basename, dirname, isAbsolute, join, resolve } from "node:path";
import type { AppContext } from "../context";
import { readMeta, writeMeta } from "../db/meta";
import type { ChannelSecrets } from "./repo";
import { inWriteTransaction } from "../db/write-transaction";

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
  inWriteTransaction(app.db, () => {
    if (!app.channels.repo.any()) {
      app.channels.repo.insert({ name: "local", driver: "local", secrets: { config: { path: DEFAULT_STORAGE_PATH } }, healthy: true });
    }
    writeMeta(app.db, SEEDED_FLAG, "1");
  });
  app.log.info("已创建默认本地存储渠道", { channel: "local", path: app.paths.storage });
}

/**
 * Older versions stored the default channel's absolute path. A local channel pointing
 * exactly at <data_dir>/storage is rewritten to the relative form (the config is sealed
 * with the master key, so this runs in code, not in an SQL migration). So is the built-in
 * channel when its absolute path is an older data directory's `…/storage` default (a snapshot
 * of such a version restored at another path, a directory moved before upgrading): it would
 * otherwise keep writing outside this data directory, on a path of the old machine. Idempotent.
 */
export function relativizeDefaultChannel(app: AppContext) {
  const storage = resolve(app.paths.storage);
  const builtin = builtinChannelId(app);
  for (const row of app.channels.repo.all()) {
    if (row.driver !== "local") continue;
    let secrets: ChannelSecrets;
    try {
      secrets = app.channels.repo.secrets(row);
    } catch {
      continue; // a seal the master key cannot open: the channel fails to load and is skipped, saying why (registry.ts)
    }
    const path = secrets.config.path?.trim();
    if (!path || !isAbsolute(path)) continue;
    const own = resolve(path) === storage;
    if (!own && !(row.id === builtin && isOldDefaultStorage(path, secrets))) continue;
    secrets.config.path = DEFAULT_STORAGE_PATH;
    if (secrets.inputs && Object.hasOwn(secrets.inputs, "path")) secrets.inputs.path = DEFAULT_STORAGE_PATH;
    app.channels.repo.replaceSecrets(row.id, secrets);
    if (own) app.log.info("本地存储渠道路径已改为相对数据目录", { channel: row.name, path: DEFAULT_STORAGE_PATH });
    else {
      app.log.warn("内置本地存储渠道指向另一个数据目录的 storage（旧版本保存的绝对路径），已改为当前数据目录的 storage", {
        channel: row.name,
        from: path,
        path: DEFAULT_STORAGE_PATH,
      });
    }
  }
}

/**
 * The channel the seed created, identified as the seed made it: the first channel (it is only
 * created when there is none), still named `local`, a local disk with nothing but a path.
 */
function builtinChannelId(app: AppContext): number | undefined {
  const first = app.channels.repo.first();
  if (first?.name !== "local" || first.driver !== "local" || first.template) return undefined;
  return first.id;
}

/**
 * Whether `path` is recognisably an older data directory's default `…/storage`, not a place an
 * admin chose: the seed's shape (a path and nothing else), named `storage`, and either gone (the
 * other machine, a directory since moved) or inside another Kura data directory (a copy).
 */
function isOldDefaultStorage(path: string, secrets: ChannelSecrets): boolean {
  if (Object.keys(secrets.config).length !== 1 || secrets.inputs || basename(resolve(path)) !== DEFAULT_STORAGE_PATH) return false;
  if (!existsSync(path)) return true;
  const parent = dirname(resolve(path));
  return existsSync(join(parent, "kura.db")) || existsSync(join(parent, "master.key"));
}
