import { mkdirSync, rmSync } from "node:fs";
import { join } from "node:path";
import { ensureBuiltinAdmin, openDataDir, StartupError } from "./boot";
import { TokenBucketLimiter } from "./auth/rate-limit";
import { SessionStore } from "./auth/sessions";
import { healthRound, startLoop } from "./channels/health";
import { cryptWrapper } from "./channels/crypt-layer";
import { cleanTempFiles } from "./channels/drivers/local";
import { ChannelRegistry } from "./channels/registry";
import { seedDefaultChannel } from "./channels/seed";
import type { Bootstrap } from "./config/bootstrap";
import { SettingsStore } from "./config/settings";
import { LOGIN_BURST, LOGIN_REFILL_SECONDS } from "./config/settings-schema";
import { cdnPurgeEnabled } from "./config/views";
import type { AppContext, DataPaths } from "./context";
import { createFetchHandler, createRouter } from "./http/app";
import { jsonError } from "./http/errors";
import { registerImageJobs } from "./images/jobs";
import { registerChannelJobs } from "./channels/drain";
import { registerChannelMetrics } from "./channels/metrics";
import { evaluateChannelAlerts } from "./ops/alerts";
import { AccessBuffer } from "./delivery/access-log";
import { RefererRules } from "./delivery/referer-rules";
import { VariantService } from "./delivery/variants";
import { ImageRepo } from "./images/repo";
import { resolveUploadIntents } from "./images/store";
import { JobQueue } from "./jobs/queue";
import { log } from "./ops/log";
import { createMetrics, scrapeGauge } from "./ops/metrics";
import { UserRepo } from "./users/repo";
import { BUILD } from "./version";

/** Largest body Bun will hand us; upload routes enforce max_upload_mb themselves while streaming. */
const MAX_REQUEST_BODY = 64 * 1024 * 1024 * 1024;

function prepareDataPaths(dataDir: string): DataPaths {
  const paths = { tmp: join(dataDir, "tmp"), variants: join(dataDir, "variants"), storage: join(dataDir, "storage") };
  // Staged uploads of a previous run are garbage by definition.
  rmSync(paths.tmp, { recursive: true, force: true });
  for (const dir of Object.values(paths)) mkdirSync(dir, { recursive: true });
  return paths;
}

type SecondsSetting = "health_check_seconds" | "activity_flush_seconds";

/** One background loop per interval setting; changing the setting reschedules its loop at once. */
function startLoops(app: AppContext, rounds: Record<SecondsSetting, () => Promise<void>>) {
  const loops = (Object.keys(rounds) as SecondsSetting[]).map((key) => ({
    key,
    loop: startLoop(key, app, () => app.settings.get()[key] * 1000, rounds[key]),
  }));
  app.settings.onChange((changed) => {
    for (const { key, loop } of loops) if (changed.includes(key)) loop.reschedule();
  });
  return loops.map((l) => l.loop);
}

/** Temp files of writes a crash interrupted, on local-disk channels (nobody else can be writing yet). */
async function cleanLocalChannels(app: AppContext) {
  for (const channel of app.channels.list()) {
    if (channel.row.driver !== "local" || !channel.driver) continue;
    const path = app.channels.repo.secrets(channel.row).config.path;
    if (path) await cleanTempFiles(path).catch((err) => app.log.warn("清理本地渠道临时文件失败", { channel: channel.row.name, err: (err as Error).message }));
  }
}

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
  const metrics = createMetrics();
  const app: AppContext = {
    bootstrap: boot,
    paths: prepareDataPaths(boot.dataDir),
    db,
    key,
    settings: new SettingsStore(db, key),
    sessions: new SessionStore(db, key),
    users: new UserRepo(db),
    images: new ImageRepo(db),
    channels: new ChannelRegistry(db, key, log, metrics),
    jobs: new JobQueue(db, { log: (level, msg, fields) => log[level](msg, fields) }),
    referers: new RefererRules(db),
    access: undefined as unknown as AccessBuffer,
    variants: undefined as unknown as VariantService,
    loginLimiter: new TokenBucketLimiter(LOGIN_BURST, LOGIN_REFILL_SECONDS),
    metrics,
    log,
    shutdown: (reason) => void (stopping ??= shutdown(reason)),
  };
  // These two read settings and paths from the finished context.
  app.access = new AccessBuffer(db, () => app.settings.get().ttl_renew_on_access);
  app.variants = new VariantService(app);
  app.sessions.pruneExpired();
  app.channels.wrap = cryptWrapper(key);
  await seedDefaultChannel(app);
  app.channels.reload();
  await cleanLocalChannels(app);
  await resolveUploadIntents(app);
  registerImageJobs(app);
  registerChannelJobs(app);
  registerChannelMetrics(app);
  scrapeGauge(metrics.registry, "kura_queue_jobs_waiting", "等待执行的任务数", () => app.jobs.counts().waiting);
  scrapeGauge(metrics.registry, "kura_queue_jobs_running", "正在执行的任务数", () => app.jobs.counts().running);

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
  app.jobs.start();
  const loops = startLoops(app, {
    health_check_seconds: () => healthRound(app).then(() => evaluateChannelAlerts(app)),
    activity_flush_seconds: async () => app.access.flush(),
  });

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
    await Promise.all(loops.map((l) => l.stop()));
    await app.jobs.stop({ deadlineMs: 30_000 });
    app.access.flush();
    db.close();
    log.info("已关闭");
    process.exit(0);
  }
  process.on("SIGTERM", () => app.shutdown("SIGTERM"));
  process.on("SIGINT", () => app.shutdown("SIGINT"));
  return -1;
}
