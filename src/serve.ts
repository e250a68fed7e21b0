import { ensureBuiltinAdmin, openDataDir, StartupError } from "./boot";
import { TokenBucketLimiter } from "./auth/rate-limit";
import { SessionStore } from "./auth/sessions";
import type { Bootstrap } from "./config/bootstrap";
import { SettingsStore } from "./config/settings";
import { LOGIN_BURST, LOGIN_REFILL_SECONDS } from "./config/settings-schema";
import { cdnPurgeEnabled } from "./config/views";
import type { AppContext } from "./context";
import { createFetchHandler, createRouter } from "./http/app";
import { jsonError } from "./http/errors";
import { log } from "./ops/log";
import { createMetrics } from "./ops/metrics";
import { UserRepo } from "./users/repo";
import { BUILD } from "./version";

/** Largest body Bun will hand us; upload routes enforce max_upload_mb themselves while streaming. */
const MAX_REQUEST_BODY = 64 * 1024 * 1024 * 1024;

export async function serve(boot: Bootstrap): Promise<number> {
  let opened;
  try {
    opened = openDataDir(boot, log);
  } catch (err) {
    if (err instanceof StartupError) {
      log.error("启动失败", { err: err.message });
      return 1;
    }
    throw err;
  }
  const { db, key } = opened;
  await ensureBuiltinAdmin(db, log);

  let stopping: Promise<void> | undefined;
  const app: AppContext = {
    bootstrap: boot,
    db,
    key,
    settings: new SettingsStore(db, key),
    sessions: new SessionStore(db, key),
    users: new UserRepo(db),
    loginLimiter: new TokenBucketLimiter(LOGIN_BURST, LOGIN_REFILL_SECONDS),
    metrics: createMetrics(),
    log,
    shutdown: (reason) => void (stopping ??= shutdown(reason)),
  };
  app.sessions.pruneExpired();

  const router = createRouter(app);
  const fetch = createFetchHandler(app, router);
  let server: ReturnType<typeof Bun.serve>;
  try {
    server = Bun.serve({
      hostname: boot.listen.hostname,
      port: boot.listen.port,
      maxRequestBodySize: MAX_REQUEST_BODY,
      idleTimeout: 120,
      fetch,
      error: () => jsonError(500, "服务器内部错误"),
    });
  } catch (err) {
    log.error("启动失败：无法监听端口", { listen: boot.listen.text, err: (err as Error).message });
    db.close();
    return 1;
  }
  const host = server.hostname?.includes(":") ? `[${server.hostname}]` : server.hostname;
  log.info(cdnPurgeEnabled(app.settings.get()) ? "CDN 缓存刷新已启用" : "CDN 缓存刷新未启用（需要 zone id、API token 和 base_url）");
  log.info("Kura 启动完成", {
    version: BUILD.version,
    commit: BUILD.commit,
    listen: `${host}:${server.port}`,
    data_dir: boot.dataDir,
  });

  async function shutdown(reason: string) {
    log.info("正在优雅关闭", { reason });
    await server.stop(false);
    db.close();
    log.info("已关闭");
    process.exit(0);
  }
  process.on("SIGTERM", () => app.shutdown("SIGTERM"));
  process.on("SIGINT", () => app.shutdown("SIGINT"));
  return -1;
}
