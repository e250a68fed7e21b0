import { ObjectNotFoundError, type ByteRange, type GetResult } from "../driver";
import { coveredPart, mismatchedPart, sizedPart, wholeResult } from "../drivers/http-range";
import { OAuthError } from "./errors";

/** Refuses a download answered 404 (absent object) or 416 (unsatisfiable range), draining its body. */
export async function refuseMissingOrBadRange(response: Response, key: string, range: ByteRange | undefined): Promise<void> {
  if (response.status !== 404 && response.status !== 416) return;
  await response.body?.cancel().catch(() => {});
  if (response.status === 404) throw new ObjectNotFoundError(key);
  throw new RangeError(`请求的范围无效: ${range?.start}-${range?.end ?? ""}`);
}

/**
 * Turns a download answer (200 or 206) into a GetResult for `range`. A server
 * that ignored Range gets the range cut out locally; a 206 whose Content-Range
 * does not cover what was asked is refused rather than served wrong.
 * `totalHint` is the object size when known from metadata (Dropbox sends it in a header).
 */
export function rangedResult(response: Response, range: ByteRange | undefined, label: string, totalHint?: number): GetResult {
  const stream = response.body ?? new Blob([]).stream();
  if (response.status === 206 && range) {
    const part = coveredPart(response.headers.get("content-range"), range);
    if (!part) {
      void stream.cancel().catch(() => {});
      throw new OAuthError(mismatchedPart(label));
    }
    return sizedPart(stream, part.start, part.gotEnd, part.end, part.totalSize, label);
  }
  const length = Number(response.headers.get("content-length") ?? "NaN");
  const total = Number.isSafeInteger(length) ? length : totalHint;
  if (total === undefined || !Number.isSafeInteger(total)) {
    void stream.cancel().catch(() => {});
    throw new OAuthError(`${label} 下载响应缺少 Content-Length`);
  }
  // Held to `total`: without Content-Length it is only metadata's word (Dropbox's header).
  return wholeResult(stream, total, range, label);
}
