import type { AppContext } from "../context";

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
      app.channels.repo.insert({ name: "local", driver: "local", secrets: { config: { path: app.paths.storage } }, healthy: true });
    }
    app.db.query("INSERT INTO meta (key, value) VALUES ('default_channel_seeded', '1')").run();
  })();
  app.log.info("已创建默认本地存储渠道", { channel: "local", path: app.paths.storage });
}
