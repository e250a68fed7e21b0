import { createAppContext } from "./app-context";
import { ensureBuiltinAdmin, openDataDir } from "./boot";
import type { Bootstrap } from "./config/bootstrap";
import { MAX_UPLOAD_MB_LIMIT } from "./config/settings-schema";
import { cdnPurgeEnabled } from "./config/views";
import { createFetchHandler, createRouter } from "./http/app";
import { WalCheckpointer } from "./db/checkpointer";
import { assertPortFree } from "./http/threads/port";
import { DeliveryThreadPool } from "./http/threads/pool";
import { unhandledServerError } from "./http/disk-full";
import { resumeInterruptedBackup } from "./ops/backups";
import { lockDataDir } from "./datadir/lock";
import { tightenDataDirPermissions } from "./datadir/permissions";
import { refuseForeignDataDir } from "./datadir/entries";
import { startupFailure, listenFailure } from "./startup-errors";
import { startBackgroundLoops } from "./loops";
import { resolveBackupAlertAtStart } from "./ops/backups";
import { tuneNativeMemory } from "./native/memory-tuning";
import { log } from "./ops/log";
import { BUILD } from "./version";
import { CONNECTION_IDLE_SECONDS } from "./http/idle-limits";
import { warnIfFewFileDescriptors } from "./ops/fd-limit";
import { warnIfLowPasswordCost } from "./auth/passwords";

/**
 * Largest body Bun will read at all: the largest legitimate one, an image at the highest
 * `max_upload_mb` the settings accept plus its framing (multipart fields, aws-chunked
 * signatures: well under 1/64 of the payload at S3's 8 KiB minimum chunk). Only a backstop: every
 * reader stops at its own bound first (upload routes and `/s3/` at the current `max_upload_mb`
 * plus framing, declared or streamed; other routes at 1 MiB).
 * Above it Bun answers an empty 413 itself, also on `/s3/` (S3 clients get no EntityTooLarge XML
 * for a declared length past ~10 GiB): lifting it would mean touching `request.body` on every
 * request to count it, which costs every upload (bench/README.md, sixth session).
 */
const MAX_REQUEST_BODY = Math.ceil(MAX_UPLOAD_MB_LIMIT * 1024 * 1024 * (1 + 1 / 64)) + 1024 * 1024;

/** How long a graceful stop waits for in-flight requests; with BACKGROUND_STOP_MS after it, well inside the unit's TimeoutStopSec=60. */
const SHUTDOWN_GRACE_MS = Number(process.env.KURA_TEST_SHUTDOWN_GRACE_MS ?? 20_000);
/** How long a graceful stop then waits for background rounds and running jobs (together). */
const BACKGROUND_STOP_MS = Number(process.env.KURA_TEST_BACKGROUND_STOP_MS ?? 25_000);

/** `kura serve`: open the data dir, build the context, listen, run the loops until a signal. Returns -1 while running. */
export async function serve(boot: Bootstrap): Promise<number> {
  let opened;
  try {
    // Not someone else's directory: nothing is created, emptied or made private in it.
    refuseForeignDataDir(boot.dataDir);
    // Before anything is read or written: a second instance must not even swap in a staged restore.
    lockDataDir(boot.dataDir);
    opened = openDataDir(boot, log);
  } catch (err) {
    return startupFailure(err, boot.dataDir, log);
  }
  const { db, key } = opened;
  // Signals and fatal errors may ask more than once; only the first request shuts down.
  let stopping = false;
  let app: Awaited<ReturnType<typeof createAppContext>>;
  try {
    // Files an older version created world-readable, made as private as this version creates them.
    tightenDataDirPermissions(boot.dataDir, log);
    tuneNativeMemory();
    app = await createAppContext(boot, db, key, log, (reason) => {
      if (stopping) return;
      stopping = true;
      void shutdown(reason);
    });
  } catch (err) {
    // A file a root-run command left behind (tmp/, a probe folder) that this user cannot remove, a full disk…
    db.close();
    return startupFailure(err, boot.dataDir, log);
  }
  const entry = createFetchHandler(app, createRouter(app));
  const threads = new DeliveryThreadPool(app, entry, boot.deliveryThreads);
  let server: ReturnType<typeof Bun.serve>;
  try {
    // SO_REUSEPORT would let a second server take the port silently: make sure it is free first.
    if (threads.enabled) assertPortFree(boot.listen);
    server = Bun.serve({
      hostname: boot.listen.hostname,
      port: boot.listen.port,
      reusePort: threads.enabled,
      maxRequestBodySize: MAX_REQUEST_BODY,
      idleTimeout: CONNECTION_IDLE_SECONDS,
      fetch: entry.fetch,
      error: unhandledServerError(log),
    });
  } catch (err) {
    log.error("启动失败：无法监听端口", { listen: boot.listen.text, err: listenFailure(err, boot.listen) });
    db.close();
    return 1;
  }
  try {
    // Once the port is ours: the factory password is logged once, and a start that could not
    // listen must not spend it (the next start logged none, and only reset-password helped).
    await ensureBuiltinAdmin(db, log);
  } catch (err) {
    void server.stop(true);
    db.close();
    return startupFailure(err, boot.dataDir, log);
  }
  threads.attach({ hostname: boot.listen.hostname, port: server.port!, maxRequestBodySize: MAX_REQUEST_BODY });
  // From here on, WAL checkpoints run in a worker, not inside the loop's commits.
  const checkpointer = new WalCheckpointer(db, log, { onCheckpoint: (kind) => app.metrics.walCheckpoints.inc({ kind }) });
  checkpointer.start();
  app.jobs.adoptOrphans();
  app.jobs.start();
  resolveBackupAlertAtStart(app);
  const loops = startBackgroundLoops(app);
  void resumeInterruptedBackup(app).catch((err) => log.error("重新备份失败", { err: (err as Error).message }));

  const host = server.hostname?.includes(":") ? `[${server.hostname}]` : server.hostname;
  log.info(cdnPurgeEnabled(app.settings.get()) ? "CDN 缓存刷新已启用" : "CDN 缓存刷新未启用（需要 zone id、API token 和 base_url）");
  warnIfFewFileDescriptors(log);
  warnIfLowPasswordCost(log);
  // Before the ready line: a stop sent as soon as it appears (systemd, a script, the tests) could
  // otherwise meet no handler, and the default action killed the process ungracefully (exit 143:
  // nothing flushed, the WAL not merged; seen in CI, and one time in four in a bare script that
  // registered its handler right after printing its ready line).
  process.on("SIGTERM", () => app.shutdown("SIGTERM"));
  process.on("SIGINT", () => app.shutdown("SIGINT"));
  // A closed terminal (`kura serve &`) or a reload reflex: a graceful stop, not an instant death.
  process.on("SIGHUP", () => app.shutdown("SIGHUP"));
  log.info("Kura 启动完成", {
    version: BUILD.version,
    commit: BUILD.commit,
    listen: `${host}:${server.port}`,
    data_dir: boot.dataDir,
  });

  /** Stop accepting, finish in-flight requests, loops and jobs, flush counters, close the DB. */
  async function shutdown(reason: string) {
    log.info("正在优雅关闭", { reason });
    // Threads first: what they hand over still needs the main thread.
    await threads.stop();
    // In-flight requests may finish, within bounds: a stalled or crawling upload would otherwise
    // keep the process past systemd's TimeoutStopSec (60 s), which then kills it before the
    // counters are flushed and the WAL is checkpointed. After the grace, connections are cut.
    const drained = await Promise.race([server.stop(false).then(() => true), Bun.sleep(SHUTDOWN_GRACE_MS).then(() => false)]);
    if (!drained) {
      log.warn("仍有请求未完成，已强制关闭连接", { grace_ms: SHUTDOWN_GRACE_MS });
      await server.stop(true);
    }
    // Background rounds and jobs end side by side, within one bound: a round waiting on a hung
    // channel (its requests time out only after KURA_CHANNEL_TIMEOUT_MS, twice in a health round)
    // must not keep the process past TimeoutStopSec, which would kill it before the counters are
    // flushed and the database left whole.
    const ended = await Promise.race([
      Promise.all([...loops.map((l) => l.stop()), app.jobs.stop({ deadlineMs: BACKGROUND_STOP_MS })]).then(() => true),
      Bun.sleep(BACKGROUND_STOP_MS + 1_000).then(() => false),
    ]);
    if (!ended) log.warn("后台任务未能及时结束，不再等待", { wait_ms: BACKGROUND_STOP_MS });
    // Each last write is tried whatever the one before it met (a disk gone read-only fails them
    // all): the process still ends, with an ERROR per step and a failed exit instead of a crash.
    let clean = true;
    const attempt = async (failure: string, step: () => unknown) => {
      try {
        await step();
      } catch (err) {
        clean = false;
        log.error(failure, { err: (err as Error).message });
      }
    };
    app.dbLock.dispose();
    await attempt("关闭时保存访问计数失败，最近的访问次数未能保存", () => app.access.flush());
    await attempt("关闭时停止 WAL 检查点线程失败", () => checkpointer.stop());
    // Leave one self-contained database file behind (no WAL to replay at the next start).
    await attempt("关闭时合并 WAL 失败，下次启动时由 SQLite 重放", () => {
      const result = db.query<{ busy: number; log: number; checkpointed: number }, []>("PRAGMA wal_checkpoint(TRUNCATE)").get();
      // A reader that began before the last writes (another process, a worker cut off mid-read)
      // kept them from the main file: nothing is lost, but kura.db alone is not the whole
      // database until the next start. (A reader that merely keeps the WAL from being emptied
      // leaves every frame merged: nothing to say.)
      if (result && result.checkpointed < result.log) {
        log.warn("关闭时 WAL 未能完全合并：仍有其他连接在读取数据库。复制数据库时请连同 kura.db-wal 一起复制（下次启动时自动合并）", {
          frames: result.log,
          merged: result.checkpointed,
        });
      }
    });
    await attempt("关闭数据库失败", () => db.close());
    log.info(clean ? "已关闭" : "已关闭，但有数据未能写入（见上方错误）");
    process.exit(clean ? 0 : 1);
  }
  return -1;
}
