import type { AppContext } from "../context";
import { tempPath, type BodyLimits, type ReceivedFile } from "../images/upload/receive";
import { fetchToFile, UrlImportError } from "../net/safe-fetch";
import { ApiError } from "./errors";
import { uploadIdleMs } from "./idle-limits";

/** The per-image size cap in bytes (max_upload_mb), read per request so changes apply at once. */
export const uploadMaxBytes = (app: AppContext) => app.settings.get().max_upload_mb * 1024 * 1024;

/** The size cap and the idle deadline every upload body is read under, per request like the cap. */
export const uploadBodyLimits = (app: AppContext): BodyLimits => ({
  maxBytes: uploadMaxBytes(app),
  idleMs: uploadIdleMs(app.settings.get().upload_idle_timeout_seconds),
});

/**
 * Fetches a user-supplied image URL into a temp file through the SSRF-safe fetch, for every
 * surface that imports by URL (native `/api/upload/url`, Chevereto `source=<url>`).
 */
export async function importFromUrl(app: AppContext, url: string, fileName?: string): Promise<ReceivedFile> {
  const path = tempPath(app.paths.tmp, "import");
  try {
    const result = await fetchToFile(url, path, { maxBytes: uploadMaxBytes(app), allow: app.bootstrap.importAllow, fileName });
    return { path, size: result.bytes, fileName: result.suggestedName };
  } catch (err) {
    if (err instanceof UrlImportError) throw new ApiError(err.status, err.message);
    throw err;
  }
}
