/**
 * CDN cache purge (spec 4.13). When an image reference is deleted, the URLs the CDN may
 * hold for it are purged at once (not after the grace period) by an asynchronous job,
 * so a slow or failing provider never blocks or fails the deletion. The provider API
 * has Cloudflare's shape: POST {api_base}/zones/{zone}/purge_cache {"files": [...]}.
 */
import type { AppContext } from "../context";
import { cdnPurgeEnabled } from "../config/views";
import { networkFailureReason } from "../channels/drivers/driver-errors";
import { PermanentJobError } from "../jobs/queue";
import { mimeToFormat } from "../delivery/negotiate";
import { APNG_MIME } from "../images/sniff";
import { imageExtension } from "../shared/links";

export const CDN_PURGE_JOB = "cdn.purge";
/** The provider's purge-by-URL limit per call. */
export const PURGE_BATCH_SIZE = 100;
const PURGE_TIMEOUT_MS = 10_000;

export interface VariantRow {
  /** 0 = format conversion only, not resized. */
  width: number;
  /** "" with a width: only `?w=<width>` (an original answered at that width, whatever the formats). */
  format: string;
}

/**
 * Every URL form the spec covers for one image: the bare link, then per variant
 * `?w=<w>` and `?w=<w>&format=<f>` (resized) or `?format=<f>` (format-only).
 * Several formats of one width share `?w=<w>`, hence the set. With `extension`, the same
 * forms of `/i/<id>.<ext>` follow (it serves the same bytes, so a CDN may hold it too).
 */
export function purgeUrls(baseUrl: string, imageId: string, variants: readonly VariantRow[], extension?: string): string[] {
  const urls = new Set<string>();
  const links = [`${baseUrl}/i/${imageId}`, ...(extension ? [`${baseUrl}/i/${imageId}.${extension}`] : [])];
  for (const link of links) {
    urls.add(link);
    for (const v of variants) {
      if (v.width > 0) {
        urls.add(`${link}?w=${v.width}`);
        if (v.format !== "") urls.add(`${link}?w=${v.width}&format=${v.format}`);
      } else {
        urls.add(`${link}?format=${v.format}`);
      }
    }
  }
  return [...urls];
}

export function batches<T>(items: readonly T[], size = PURGE_BATCH_SIZE): T[][] {
  const out: T[][] = [];
  for (let i = 0; i < items.length; i += size) out.push(items.slice(i, i + size));
  return out;
}

/**
 * The `w`/`format` URLs that were answered with the original bytes (cacheable for a year), so
 * no variant row names them: a width at or above the stored width (`?w=`, and with every
 * `format=`), the stored format asked for by name, and any width of an APNG. Without these
 * an image narrower than a configured width stayed readable at the CDN after its deletion.
 * `widths`/`formats` are the current settings; a URL they no longer allow answers 400 anyway.
 */
export function originalForms(stored: { width: number; mime: string }, widths: readonly number[] | null, formats: readonly string[]): VariantRow[] {
  const own = stored.mime === APNG_MIME ? "png" : mimeToFormat(stored.mime);
  const rows: VariantRow[] = own !== null && formats.includes(own) ? [{ width: 0, format: own }] : [];
  for (const width of widths ?? []) {
    if (width < stored.width && stored.mime !== APNG_MIME) continue;
    // `?w=` alone (format "": no `&format=` form), answered even when no format is configured.
    rows.push({ width, format: "" });
    for (const format of formats) rows.push({ width, format });
  }
  return rows;
}

/**
 * Call inside the transaction that deletes the reference: the variant rows are read now
 * because they vanish with the blob later, and the job commits or rolls back with the delete.
 * One job per batch, so a failing batch is retried alone.
 */
export function enqueueCdnPurge(app: Pick<AppContext, "images" | "settings" | "jobs">, imageId: string, blobId: number) {
  const s = app.settings.get();
  if (!cdnPurgeEnabled(s)) return;
  const blob = app.images.blob(blobId);
  const variants = [...app.images.variantsOf(blobId), ...(blob ? originalForms(blob, s.process_widths, s.process_formats) : [])];
  const extension = blob && imageExtension(blob.mime);
  for (const files of batches(purgeUrls(s.base_url, imageId, variants, extension))) app.jobs.enqueue(CDN_PURGE_JOB, { files });
}

/** One purge call. The token is read from the settings at run time, never stored in the job. */
async function purge(app: AppContext, { files }: { files: string[] }, signal: AbortSignal) {
  if (!Array.isArray(files) || files.length === 0) return;
  const s = app.settings.get();
  // Purge was switched off after the deletion: nothing to call any more.
  if (!cdnPurgeEnabled(s)) return;
  if (files.length > PURGE_BATCH_SIZE) throw new PermanentJobError("CDN 刷新任务的地址数量超过上限");
  const url = `${app.bootstrap.cdnApiBase}/zones/${encodeURIComponent(s.cdn_provider_zone_id)}/purge_cache`;
  let res: Response;
  try {
    res = await fetch(url, {
      method: "POST",
      headers: { authorization: `Bearer ${s.cdn_provider_api_token}`, "content-type": "application/json" },
      body: JSON.stringify({ files }),
      signal: AbortSignal.any([signal, AbortSignal.timeout(PURGE_TIMEOUT_MS)]),
    });
  } catch (err) {
    // In Chinese like a channel's network failure, not the runtime's code (ECONNREFUSED).
    throw new Error(`CDN 刷新请求失败：${networkFailureReason(err)}`);
  }
  const body = (await res.json().catch(() => null)) as { success?: unknown } | null;
  if (!res.ok || body?.success !== true) throw new Error(`CDN 刷新失败：HTTP ${res.status}`);
  app.log.info("CDN 缓存已刷新", { urls: files.length });
}

export function registerCdnPurgeJob(app: AppContext) {
  app.jobs.register(CDN_PURGE_JOB, (payload, ctx) => purge(app, payload, ctx.signal), {
    concurrency: 2,
    maxAttempts: 12,
    backoff: { baseMs: 2_000, capMs: 30 * 60_000 },
  });
}
