import { requeueUnfinished } from "./backfill";
import { setLongTimeout, type LongTimeout } from "../jobs/long-timeout";
import type { AppContext } from "../context";
import { FailureLog } from "../ops/repeated-failure";
import { noticeServerFault } from "../ops/server-faults";

/**
 * A loop that runs `round` now and then every `intervalMs()`. The interval is re-read each
 * round, and `reschedule()` (called when its setting changes) re-times the wait at once: the new
 * interval counted from the end of the last round, so a shorter one applies without waiting out
 * the old one, and changes in a row do not restart the wait each time (a setting changed more
 * often than its interval stopped the loop).
 */
export function startLoop(
  name: string,
  app: AppContext,
  intervalMs: () => number,
  round: () => Promise<void>,
  opts: { runAtStart?: boolean; firstDelayMs?: number; now?: () => number } = {},
) {
  const now = opts.now ?? Date.now;
  let timer: LongTimeout | undefined;
  let stopped = false;
  let busy = false;
  let running: Promise<void> = Promise.resolve();
  /** Where the interval counts from: the end of the last round (the first wait: as if one had ended). */
  let anchor = now() + (opts.firstDelayMs ?? intervalMs()) - intervalMs();
  const schedule = () => {
    timer?.clear();
    // Never longer than the interval: a clock set back since the anchor must not stall the loop.
    if (!stopped && !busy) timer = setLongTimeout(tick, Math.min(intervalMs(), Math.max(0, anchor + intervalMs() - now())));
  };
  const failures = new FailureLog(app.log, name, now);
  const tick = () => {
    busy = true;
    running = round()
      .then(
        () => failures.succeeded(),
        (err) => {
          failures.failed(err);
          noticeServerFault(err);
        },
      )
      .finally(() => {
        busy = false;
        anchor = now();
        schedule();
      });
  };
  if (opts.runAtStart === false) schedule();
  else tick();
  return {
    reschedule: schedule,
    async stop() {
      stopped = true;
      timer?.clear();
      await running;
    },
  };
}

/**
 * Probes every channel (retrying failed loads) and records healthy / last_error / last_checked_at.
 * All at once: a hung peer costs its probe a whole timeout (twice, with the retry), and probing
 * in turn would keep every channel after it at its old verdict that long, so uploads would
 * still be tried on another dead channel, or a recovered one stay unused.
 */
export async function healthRound(app: AppContext) {
  const live = app.channels.list().filter((channel) => !channel.row.deleting);
  let recovered = false;
  await Promise.all(
    live.map(async (channel) => {
      const { wasHealthy, after } = await probeAndLog(app, channel.row.id);
      if (after?.healthy && !wasHealthy) recovered = true;
    }),
  );
  if (recovered) requeueUnfinishedEverywhere(app);
}

/** Probes one channel (see ChannelRegistry.probe) and logs a change of its health either way. */
export async function probeAndLog(app: AppContext, id: number, deep = false) {
  const wasHealthy = app.channels.get(id)?.healthy ?? false;
  const after = await app.channels.probe(id, deep);
  if (after && after.healthy !== wasHealthy) {
    if (after.healthy) app.log.info("存储渠道恢复健康", { channel: after.row.name });
    else app.log.warn("存储渠道不健康", { channel: after.row.name, err: after.row.last_error });
  }
  return { wasHealthy, after };
}

/**
 * A channel back in service can be either end of a failed copy: its target, or the source of a
 * copy to another channel (a replica that failed while the only copy was on a disk that was not
 * mounted gave up after its last retry and was never tried again). So every healthy channel's
 * unfinished replicas (failed, and pending ones whose job is gone) get a fresh job; those already
 * queued keep theirs (one job per blob and channel).
 */
export function requeueUnfinishedEverywhere(app: AppContext) {
  for (const channel of app.channels.list()) {
    if (channel.healthy && !channel.row.deleting) requeueUnfinished(app, channel.row.id);
  }
}
