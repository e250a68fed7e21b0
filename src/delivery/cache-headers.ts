// The cache-header table of spec 4.5 as one function, so every delivery response (200, 304,
// fallback, 302, errors) gets its headers from a single place.

export type DeliveryArea = "i" | "o" | "thumb";
export type DeliveryResponseKind = "original" | "variant" | "fallback" | "redirect" | "error";

export interface CacheHeaderInput {
  area: DeliveryArea;
  kind: DeliveryResponseKind;
  /** Required for `original` and `variant`. */
  etag?: string;
  /** True when the representation was (or could have been) chosen from Accept. */
  varyAccept?: boolean;
  /** Upload time (a string is an HTTP date already formatted); sent for originals only (rule 2). */
  lastModified?: Date | number | string;
}

/** `/i/`: content behind a short ID never changes, so any cache may keep it for a year. */
export const IMMUTABLE_PUBLIC = "public, max-age=31536000, immutable";
/** `/o/`: an alias can be re-pointed by a new upload of the same key; revalidate each use. */
export const REVALIDATE_PUBLIC = "public, no-cache";

/**
 * Headers for one delivery response. A 304 uses the same input as the 200 it stands for
 * (spec: same Cache-Control, ETag and Vary). Error statuses (400/403/404/500/503) get none.
 */
export function cacheHeaders(input: CacheHeaderInput): Record<string, string> {
  switch (input.kind) {
    case "error":
      return {};
    case "fallback": // original served because processing failed: must not be cached as the variant
    case "redirect": // the target channel may change; never let a cache pin the 302
      return { "Cache-Control": "no-store" };
    case "original":
    case "variant": {
      if (!input.etag) throw new Error("cacheHeaders: original/variant responses need an ETag");
      const headers: Record<string, string> = { "Cache-Control": cacheControlFor(input.area), ETag: input.etag };
      if (input.varyAccept) headers.Vary = "Accept";
      if (input.kind === "original" && input.lastModified !== undefined) {
        headers["Last-Modified"] = typeof input.lastModified === "string" ? input.lastModified : httpDate(input.lastModified);
      }
      return headers;
    }
  }
}

function cacheControlFor(area: DeliveryArea): string {
  if (area === "o") return REVALIDATE_PUBLIC;
  // Thumb (`/api/admin/images/{id}/thumb`): "response headers as in 4.5", i.e. those of `/i/`.
  // `public` behind a session is harmless here: the same bytes are public under `/i/{id}`.
  return IMMUTABLE_PUBLIC;
}

/** IMF-fixdate (RFC 9110 5.6.7), e.g. `Sun, 06 Nov 1994 08:49:37 GMT`. */
export function httpDate(when: Date | number): string {
  return new Date(when).toUTCString();
}
