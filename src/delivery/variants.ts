import { encodesInParallel, renderConcurrency, uvPoolSize } from "./thread-pool";
import type { SettingsStore } from "../config/settings";
import type { Settings } from "../config/settings-schema";
import type { BlobReadDeps } from "../images/read";
import type { BlobRow } from "../images/repo";
import type { Metrics } from "../ops/metrics";
import type { CountHandle } from "../ops/metrics-batch";
import { HOT_BYTES_BUDGET, HotBytes, variantKey } from "./hot-bytes";
import { HOT_ITEM_MAX, type VariantBytes } from "./pipeline";
import { QueueWaitTimeoutError, SingleFlight, WorkLimiter } from "./limiter";
import type { DeliveryFormat } from "./negotiate";
import { renderProfile } from "./render-profile";
import { openRenderSource } from "./render-source";
import { lateRenderLimitSeconds, renderVariant } from "./transform";
import { serverFaultBehind } from "../images/pixel-faults";
import { noticeServerFault, serverFaultOf } from "../ops/server-faults";
import { pauseAt } from "../testing/hold-points";
import { VariantCache } from "./variant-cache";

/** How long a variant whose render failed is served as the original without a new attempt. */
const FAILED_RENDER_RETRY_MS = 10 * 60_000;
/** Failures remembered at most (oldest forgotten first). */
const MAX_FAILED_RENDERS = 10_000;

/** A variant whose render failed a short while ago: the caller serves the original instead. */
export class VariantUnavailableError extends Error {
  constructor() {
    super("该尺寸或格式最近生成失败，暂时返回原图");
    this.name = "VariantUnavailableError";
  }
}

/** What a variant needs to know about its blob. */
export type VariantSource = Pick<BlobRow, "id" | "sha256" | "storage_key">;

/**
 * Produces resized/converted variants: disk cache first (LRU under variants_cache_mb),
 * otherwise one generation per (blob, width, format) however many requests wait for it,
 * at most `process_workers` encodes at once, each bounded by `process_timeout_ms`.
 */
/** What the variant service needs: blob reads for originals (and the variants table via images), settings, its cache dir, metrics. */
export interface VariantDeps extends BlobReadDeps {
  settings: SettingsStore;
  paths: { tmp: string; variants: string };
  metrics: Metrics;
}

/** Settings that decide whether a render can succeed. */
const RENDER_LIMITS = ["process_timeout_ms", "process_workers", "process_formats", "max_pixels_mp"] as const;

export class VariantService {
  readonly cache: VariantCache;
  /** Hot originals and variants in memory, shared with the original-serving path. */
  readonly hot = new HotBytes(HOT_BYTES_BUDGET, HOT_ITEM_MAX);
  private readonly limiter: WorkLimiter;
  private readonly flights = new SingleFlight<string, VariantBytes>();
  /** Variant keys whose last render failed, with the time a request may try again. */
  private readonly failedUntil = new Map<string, number>();
  private readonly hits: CountHandle;

  constructor(private readonly app: VariantDeps) {
    const s = app.settings.get();
    // No onEvict hook: the `variants` rows record every URL ever generated for a blob (what a
    // CDN may still cache for a year), not what the local LRU holds, so evictions leave them.
    this.cache = new VariantCache({ dir: app.paths.variants, maxBytes: s.variants_cache_mb * 1024 * 1024 });
    this.limiter = new WorkLimiter(renderConcurrency(s.process_workers));
    this.noteRenderLimit(s.process_workers);
    this.hits = app.metrics.variantLookups.child({ result: "hit" });
    app.settings.onChange((changed, next) => {
      if (changed.includes("process_workers")) {
        this.limiter.setLimit(renderConcurrency(next.process_workers));
        this.noteRenderLimit(next.process_workers);
      }
      if (changed.includes("variants_cache_mb")) void this.cache.setMaxBytes(next.variants_cache_mb * 1024 * 1024);
      // What made a render fail may be what was just changed (a deadline too short for it): each
      // remembered failure gets its next try now rather than up to ten minutes later.
      if (RENDER_LIMITS.some((key) => changed.includes(key))) this.failedUntil.clear();
    });
  }

  /** A variant already in memory (counted as a cache hit), without a promise; undefined otherwise. */
  hotVariant(sha256: string, width: number, format: DeliveryFormat, profile: string): VariantBytes | undefined {
    const hot = this.hot.variant(sha256, width, format, profile);
    if (hot) this.hits.inc();
    return hot;
  }

  /** A variant answer given again from memory elsewhere (the warm-answer memo): counted as a cache hit too. */
  countHit() {
    this.hits.inc();
  }

  /**
   * `profile`: the render profile the caller named in its ETag, taken from the settings of this
   * same turn; a render starts only under the settings it names (after a change in between, the
   * render uses the new ones and is kept under their profile, so bytes and tag never disagree).
   */
  async get(blob: VariantSource, width: number, format: DeliveryFormat, profile?: string): Promise<VariantBytes> {
    const settings = this.app.settings.get();
    const current = renderProfile(settings);
    profile ??= current;
    const hot = this.hotVariant(blob.sha256, width, format, profile);
    if (hot) return hot;
    const key = variantKey(blob.sha256, width, format, profile);
    const hit = this.cache.get(key);
    const file = hit && Bun.file(hit.path);
    if (hit && file && (await file.exists())) {
      this.hits.inc();
      if (hit.size > HOT_ITEM_MAX) return { path: hit.path, size: hit.size };
      const bytes = this.hot.set(key, new Uint8Array(await file.arrayBuffer()));
      return { bytes, size: bytes.size };
    }
    if (hit) await this.cache.delete(key);
    this.app.metrics.variantLookups.inc({ result: "miss" });
    if (this.recentlyFailed(key)) throw new VariantUnavailableError();
    // Settings changed between the caller's tag and now (not in one turn): render under the new ones.
    if (profile !== current) return this.get(blob, width, format, current);
    return this.flights.do(key, () => this.generate(blob, width, format, key, settings));
  }

  /**
   * Whether the variant's last render failed (an error, or the deadline) less than
   * FAILED_RENDER_RETRY_MS ago: the original is served (spec 4.5 rule 5) without rendering again.
   * Before, every request started the same failing or overlong render once more, so two
   * anonymous requests for a large image could hold every render slot for as long as they liked.
   */
  private recentlyFailed(key: string): boolean {
    const until = this.failedUntil.get(key);
    if (until === undefined) return false;
    if (until > Date.now()) return true;
    this.failedUntil.delete(key);
    return false;
  }

  /** Says once per setting when the thread pool holds renders below `process_workers` (thread-pool.ts). */
  private noteRenderLimit(workers: number) {
    const allowed = renderConcurrency(workers);
    if (allowed >= workers) return;
    this.app.log.info("图片处理并发低于 process_workers：libuv 线程池需留一个线程给上传和文件读写，可在启动前设置 UV_THREADPOOL_SIZE 增大线程池", {
      process_workers: workers,
      renders: allowed,
      pool: uvPoolSize(),
    });
  }

  private rememberFailure(key: string) {
    // Oldest first out: the map stays small whatever is requested.
    if (this.failedUntil.size >= MAX_FAILED_RENDERS) this.failedUntil.delete(this.failedUntil.keys().next().value as string);
    this.failedUntil.set(key, Date.now() + FAILED_RENDER_RETRY_MS);
  }

  private async generate(blob: VariantSource, width: number, format: DeliveryFormat, key: string, s: Readonly<Settings>): Promise<VariantBytes> {
    let bytes: Buffer;
    try {
      // The slot is taken before the original is opened: waiting requests then hold no source
      // bytes, so memory is bounded by process_workers renders, not by the queue length. The
      // wait for it is bounded by process_timeout_ms too: under a flood of cold renders a request
      // gets the original (spec 4.5 rule 5) instead of queueing for minutes.
      bytes = await this.limiter.run(async (hold) => {
        const source = await openRenderSource(this.app, blob, this.app.paths.tmp);
        // A spilled file may go only once libvips has really stopped reading it (see `hold`).
        let running: Promise<void> | undefined;
        try {
          return await renderVariant(source.input, {
            width,
            format,
            quality: { webp: s.process_quality_webp, jpeg: s.process_quality_jpeg },
            webpMethod: s.process_webp_method,
            parallelEncodes: encodesInParallel(this.limiter.limit),
            timeoutMs: s.process_timeout_ms,
            // Past the deadline the request got the original, but the encode ran on: keep it.
            late: (late) => {
              this.app.metrics.variantLateRenders.inc({ format, result: "kept" });
              void this.store(blob, width, format, key, late).catch(() => {});
            },
            lateFailed: (err, killed) => this.lateRenderFailed(blob, width, format, s, err, killed),
            hold: (work) => {
              running = work;
              hold(work);
            },
          });
        } finally {
          void (running ?? Promise.resolve()).then(() => source.release());
        }
      }, s.process_timeout_ms);
      this.app.metrics.variantRenders.inc({ format, result: "ok" });
    } catch (err) {
      // A render that never got a slot is counted apart: it did not run, so it says nothing of the image.
      this.app.metrics.variantRenders.inc({ format, result: err instanceof QueueWaitTimeoutError ? "queue_timeout" : "error" });
      // Only a render that failed for the image's sake is remembered; one that never got a slot
      // (a busy moment) or that the server failed (out of descriptors, which libvips reports as
      // an unreadable image; a full disk) may be tried by the next request.
      if (!(err instanceof QueueWaitTimeoutError) && !(await serverFaultBehind(err))) this.rememberFailure(key);
      throw err;
    }
    return this.store(blob, width, format, key, bytes);
  }

  /**
   * A render that missed the deadline and then did not finish either: its failure stays remembered
   * (the original is served), and the operator learns which image needs a longer `process_timeout_ms`.
   * At most one per variant per FAILED_RENDER_RETRY_MS, as the failure keeps it from running again.
   */
  private lateRenderFailed(blob: VariantSource, width: number, format: DeliveryFormat, s: Readonly<Settings>, err: unknown, killed: boolean) {
    this.app.metrics.variantLateRenders.inc({ format, result: killed ? "killed" : "failed" });
    const where = { blob: blob.sha256, width, format };
    if (killed) this.app.log.warn("超时的渲染被终止，该变体暂以原图提供", { ...where, limit_s: lateRenderLimitSeconds(s.process_timeout_ms) });
    else this.app.log.warn("超时的渲染最终失败，该变体暂以原图提供", { ...where, err: (err as Error).message });
  }

  /** A rendered variant into the disk cache, the variants table and the hot bytes. */
  private async store(blob: VariantSource, width: number, format: DeliveryFormat, key: string, bytes: Buffer): Promise<VariantBytes> {
    try {
      return await this.keep(blob, width, format, key, bytes);
    } finally {
      // Forgotten only once the variant is in place (or known unkeepable): before, a late render's failure
      // was forgotten first, and a request during the cache write started the same overlong render again.
      this.failedUntil.delete(key);
    }
  }

  private async keep(blob: VariantSource, width: number, format: DeliveryFormat, key: string, bytes: Buffer): Promise<VariantBytes> {
    await pauseAt("variant.store", `key=${key}`);
    const unkept = { bytes: new Blob([bytes as Uint8Array<ArrayBuffer>]), size: bytes.length };
    let path: string | null;
    try {
      path = await this.cache.put(key, bytes);
    } catch (err) {
      // A full or read-only disk, a failing one: the render itself succeeded, so the request
      // gets it (not the original in the wrong format), only nothing of it is kept.
      if (!serverFaultOf(err)) throw err;
      this.cacheUnwritable(err);
      return unkept;
    }
    if (!this.app.images.blob(blob.id)) {
      // Physically deleted while it rendered (its dropBlob ran before this file existed): the
      // request that started it still gets the bytes, but nothing of them is kept or recorded.
      await this.cache.delete(key);
      return unkept;
    }
    try {
      this.app.images.recordVariant(blob.id, width, format, bytes.length);
    } catch (err) {
      // Unrecorded, the file would be a cache entry no blob delete finds: it goes again.
      if (!serverFaultOf(err)) throw err;
      this.cacheUnwritable(err); // before the await: the breaker must hear of a lock before the next write waits on it
      await this.cache.delete(key);
      return unkept;
    }
    const body = this.hot.set(key, bytes);
    return path && bytes.length > HOT_ITEM_MAX ? { path, size: bytes.length } : { bytes: body, size: bytes.length };
  }

  private unwritableWarnedAt = Number.NEGATIVE_INFINITY;

  /** One WARN a minute while rendered variants cannot be kept, however many renders meet it. */
  private cacheUnwritable(err: unknown) {
    noticeServerFault(err); // the lock breaker hears of it: the next writes need not wait it out too
    if (Date.now() - this.unwritableWarnedAt < 60_000) return;
    this.unwritableWarnedAt = Date.now();
    this.app.log.warn("变体缓存无法写入，渲染结果直接返回但不缓存", { err: (err as Error).message });
  }

  /** Told of every dropped blob (the delivery threads keep hot bytes of their own). */
  onBlobDropped: ((sha256: string) => void) | undefined;

  /** Drops every cached variant of a blob (physical delete). */
  async dropBlob(sha256: string) {
    this.hot.deletePrefix(sha256);
    this.onBlobDropped?.(sha256);
    await this.cache.deletePrefix(sha256);
  }
}
