import type { AppContext } from "../context";
import { sqlTime } from "../db/time";
import type { BlobRow } from "../images/repo";
import { openBlob } from "../images/read";
import { SingleFlight, WorkLimiter } from "./limiter";
import type { DeliveryFormat } from "./negotiate";
import { renderVariant } from "./transform";
import { VariantCache } from "./variant-cache";

export interface VariantBytes {
  /** A cached file to stream, or the bytes when the cache did not keep them. */
  path?: string;
  bytes?: Buffer;
  size: number;
}

/**
 * Produces resized/converted variants: disk cache first (LRU under variants_cache_mb),
 * otherwise one generation per (blob, width, format) however many requests wait for it,
 * at most `process_workers` encodes at once, each bounded by `process_timeout_ms`.
 */
export class VariantService {
  readonly cache: VariantCache;
  private readonly limiter: WorkLimiter;
  private readonly flights = new SingleFlight<string, VariantBytes>();

  constructor(private readonly app: AppContext) {
    const s = app.settings.get();
    this.cache = new VariantCache({
      dir: app.paths.variants,
      maxBytes: s.variants_cache_mb * 1024 * 1024,
      onEvict: (key) => this.forget(key),
    });
    this.limiter = new WorkLimiter(s.process_workers);
    app.settings.onChange((changed, next) => {
      if (changed.includes("process_workers")) this.limiter.setLimit(next.process_workers);
      if (changed.includes("variants_cache_mb")) void this.cache.setMaxBytes(next.variants_cache_mb * 1024 * 1024);
    });
  }

  static key(sha256: string, width: number, format: string): string {
    return `${sha256}-${width}-${format}`;
  }

  async get(blob: BlobRow, width: number, format: DeliveryFormat): Promise<VariantBytes> {
    const key = VariantService.key(blob.sha256, width, format);
    const hit = this.cache.get(key);
    if (hit && (await Bun.file(hit.path).exists())) {
      this.app.metrics.variantLookups.inc({ result: "hit" });
      return { path: hit.path, size: hit.size };
    }
    if (hit) await this.cache.delete(key);
    this.app.metrics.variantLookups.inc({ result: "miss" });
    return this.flights.do(key, () => this.generate(blob, width, format, key));
  }

  private async generate(blob: BlobRow, width: number, format: DeliveryFormat, key: string): Promise<VariantBytes> {
    const source = await openBlob(this.app, blob);
    const original = Buffer.from(await new Response(source.stream).arrayBuffer());
    const s = this.app.settings.get();
    let bytes: Buffer;
    try {
      bytes = await this.limiter.run((hold) =>
        renderVariant(original, {
          width,
          format,
          quality: { webp: s.process_quality_webp, jpeg: s.process_quality_jpeg },
          webpMethod: s.process_webp_method,
          timeoutMs: s.process_timeout_ms,
          hold,
        }),
      );
      this.app.metrics.variantRenders.inc({ format, result: "ok" });
    } catch (err) {
      this.app.metrics.variantRenders.inc({ format, result: "error" });
      throw err;
    }
    const path = await this.cache.put(key, bytes);
    // Recorded so a CDN purge can name every generated URL of the image.
    this.app.db
      .query("INSERT OR REPLACE INTO variants (blob_id, width, format, size, created_at) VALUES (?, ?, ?, ?, ?)")
      .run(blob.id, width, format, bytes.length, sqlTime());
    return path ? { path, size: bytes.length } : { bytes, size: bytes.length };
  }

  private forget(key: string) {
    const m = /^([0-9a-f]{64})-(\d+)-(\w+)$/.exec(key);
    if (!m) return;
    this.app.db
      .query("DELETE FROM variants WHERE width = ? AND format = ? AND blob_id = (SELECT id FROM blobs WHERE sha256 = ?)")
      .run(Number(m[2]), m[3]!, m[1]!);
  }

  /** Drops every cached variant of a blob (physical delete). */
  async dropBlob(sha256: string) {
    await this.cache.deletePrefix(sha256);
  }
}
