import { registerOpsMetrics } from "./ops/ops-metrics";
import type { Database } from "bun:sqlite";
import { mkdirSync, rmSync } from "node:fs";
import { join } from "node:path";
import { LoginThrottle } from "./auth/login-throttle";
import { SessionStore } from "./auth/sessions";
import { cryptWrapper } from "./channels/crypt-layer";
import { registerChannelJobs } from "./channels/drain";
import { cleanTempFiles, resolveLocalPath } from "./channels/drivers/local";
import { driverSiteOf } from "./channels/factory";
import { registerChannelMetrics } from "./channels/metrics";
import { ChannelRegistry } from "./channels/registry";
import { relativizeDefaultChannel, seedDefaultChannel } from "./channels/seed";
import type { Bootstrap } from "./config/bootstrap";
import type { MasterKey } from "./config/master-key";
import { SettingsStore } from "./config/settings";
import { LOGIN_BURST, LOGIN_REFILL_SECONDS } from "./config/settings-schema";
import type { AppContext, DataPaths } from "./context";
import { AccessBuffer } from "./delivery/access-log";
import { DeliveryLookups } from "./delivery/lookups";
import { RefererRules } from "./delivery/referer-rules";
import { VariantService } from "./delivery/variants";
import { WalDurability } from "./db/durability";
import { LockBreaker } from "./db/lock-breaker";
import { watchServerFaults } from "./ops/server-faults";
import { GroupCommit } from "./db/group-commit";
import { registerImageJobs } from "./images/jobs";
import { ImageRepo } from "./images/repo";
import { fileNameBacklogSize } from "./images/repos/file-name-index";
import { resolveUploadIntents } from "./images/store";
import { UploadGate } from "./images/upload/limits";
import type { JobKinds } from "./jobs/kinds";
import { JobQueue } from "./jobs/queue";
import { registerCdnPurgeJob } from "./ops/cdn-purge";
import type { Logger } from "./ops/log";
import { createMetrics, scrapeGauge } from "./ops/metrics";
import { fsProblem } from "./shared/fs-errors";
import { reconcileMultipartUploads } from "./s3/multipart-restart";
import { UserRepo } from "./users/repo";

function prepareDataPaths(dataDir: string, log: Logger): DataPaths {
  const paths = { tmp: join(dataDir, "tmp"), variants: join(dataDir, "variants"), storage: join(dataDir, "storage"), multipart: join(dataDir, "multipart") };
  // Staged uploads of a previous run are garbage by definition.
  rmSync(paths.tmp, { recursive: true, force: true });
  for (const dir of [paths.tmp, paths.variants, paths.multipart]) mkdirSync(dir, { recursive: true });
  // storage/ is the built-in channel's, and a channel that cannot load is skipped, not fatal (spec
  // 3.2): the service starts and serves the copies on its other channels while the built-in one is
  // unhealthy, with the reason in its last_error and an alert, and retried at every health check.
  try {
    mkdirSync(paths.storage, { recursive: true });
  } catch (err) {
    log.warn("数据目录中的 storage 无法使用，内置本地渠道将不可用，其他渠道照常服务", { path: paths.storage, err: fsProblem(err) ?? (err as Error).message });
  }
  return paths;
}

/**
 * Temp files of writes a crash interrupted, on local-disk channels. Walking a channel of a
 * million objects takes a while, so this runs in the background after start; only files
 * older than `startedAt` are removed, so the temp files of uploads running meanwhile stay.
 */
async function cleanLocalChannels(app: AppContext, startedAt: number) {
  for (const channel of app.channels.list()) {
    if (channel.row.driver !== "local" || !channel.driver) continue;
    const path = app.channels.repo.secrets(channel.row).config.path;
    const olderThanMs = Math.max(1, Date.now() - startedAt);
    if (path)
      await cleanTempFiles(resolveLocalPath(path, app.bootstrap.dataDir), olderThanMs).catch((err) =>
        app.log.warn("清理本地渠道临时文件失败", { channel: channel.row.name, err: (err as Error).message }),
      );
  }
}

/**
 * Builds the whole application context over an opened database: repositories, channels
 * (seeded, loaded, crash leftovers undone), job kinds and metrics. Nothing listens yet.
 */
export async function createAppContext(boot: Bootstrap, db: Database, key: MasterKey, log: Logger, shutdown: (reason: string) => void): Promise<AppContext> {
  // In dependency order: each part gets only what was built before it, and nothing is patched in later.
  const metrics = createMetrics();
  const paths = prepareDataPaths(boot.dataDir, log);
  // Open S3 multipart uploads go on after a restart: their rows matched with the part files kept.
  reconcileMultipartUploads(db, paths.multipart, log);
  const settings = new SettingsStore(db, key);
  const images = new ImageRepo(db);
  const channels = new ChannelRegistry(db, key, log, metrics, driverSiteOf(boot), cryptWrapper(key));
  const jobs = new JobQueue<JobKinds>(db, { log: (level, msg, fields) => log[level](msg, fields) });
  const variants = new VariantService({ settings, paths, images, channels, jobs, log, metrics });
  const lookups = new DeliveryLookups(images);
  const dbLock = new LockBreaker(db, log);
  dbLock.stopWatching = watchServerFaults((err) => dbLock.noticed(err));
  const app: AppContext = {
    bootstrap: boot,
    paths,
    db,
    commits: new GroupCommit(db, (units) => {
      metrics.groupCommits.inc();
      metrics.groupCommitUnits.inc(units);
    }),
    durability: new WalDurability(db),
    dbLock,
    key,
    settings,
    sessions: new SessionStore(db, key),
    users: new UserRepo(db),
    images,
    lookups,
    channels,
    jobs,
    referers: new RefererRules(db),
    // A renewed expiry must reach delivery at once, not after the cached row's LOOKUP_TTL_MS.
    access: new AccessBuffer(
      db,
      () => settings.get().ttl_renew_on_access,
      (id) => lookups.forget(id),
    ),
    variants,
    loginLimiter: new LoginThrottle(LOGIN_BURST, LOGIN_REFILL_SECONDS),
    uploadGate: new UploadGate(settings),
    metrics,
    log,
    shutdown,
  };
  app.sessions.pruneExpired();
  await seedDefaultChannel(app);
  relativizeDefaultChannel(app);
  app.channels.reload();
  void cleanLocalChannels(app, Date.now());
  await resolveUploadIntents(app);
  registerImageJobs(app);
  registerChannelJobs(app);
  registerCdnPurgeJob(app);
  registerChannelMetrics(app);
  registerOpsMetrics(app);
  scrapeGauge(metrics.registry, "kura_queue_jobs_waiting", "等待执行的任务数", () => app.jobs.counts().waiting);
  scrapeGauge(metrics.registry, "kura_queue_jobs_running", "正在执行的任务数", () => app.jobs.counts().running);
  scrapeGauge(metrics.registry, "kura_search_backlog_images", "文件名尚未进入搜索索引的图片数（搜索照样能找到它们）", () => fileNameBacklogSize(app.db));
  return app;
}
