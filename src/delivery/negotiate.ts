// Chooses what `/i/{id}` answers with: the stored original, or a variant (resized and/or
// converted), and whether the answer depends on `Accept` (spec 4.5 rule 1).
import type { DeliveryParams } from "./params";

export type DeliveryFormat = "webp" | "jpeg" | "png" | "avif" | "gif";

const MIME_BY_FORMAT: Record<DeliveryFormat, string> = {
  webp: "image/webp",
  jpeg: "image/jpeg",
  png: "image/png",
  avif: "image/avif",
  gif: "image/gif",
};

export function formatToMime(format: DeliveryFormat): string {
  return MIME_BY_FORMAT[format];
}

const formatOfMime = new Map<string, DeliveryFormat | null>();

/** Format name of a stored MIME type; null for anything we cannot encode back to. */
export function mimeToFormat(mime: string): DeliveryFormat | null {
  // Asked on every delivery with one of a handful of stored types: remember the answers.
  const known = formatOfMime.get(mime);
  if (known !== undefined) return known;
  const format = formatOf(mime);
  if (formatOfMime.size < 256) formatOfMime.set(mime, format);
  return format;
}

function formatOf(mime: string): DeliveryFormat | null {
  const base = mime.split(";")[0]!.trim().toLowerCase();
  if (base === "image/jpg" || base === "image/pjpeg") return "jpeg";
  for (const [format, m] of Object.entries(MIME_BY_FORMAT)) if (m === base) return format as DeliveryFormat;
  return null;
}

export type Representation =
  | { kind: "original"; varyAccept: boolean }
  | { kind: "variant" /** 0 = not resized */; width: number; format: DeliveryFormat; varyAccept: boolean };

/**
 * Rule 1: without an explicit format, a stored JPEG/PNG becomes WebP when the client lists
 * `image/webp` and WebP is enabled. Whenever that decision was possible (whatever its outcome)
 * the response varies on Accept, so caches never hand a WebP to a client that did not ask.
 * `w` without a format keeps the (negotiated or) stored format, so animated GIF/WebP stay
 * animated. An explicit format equal to the stored one without `w` is just the original.
 */
export function chooseRepresentation(
  storedMime: string,
  params: DeliveryParams,
  acceptHeader: string | null | undefined,
  processFormats: readonly string[],
): Representation {
  const stored = mimeToFormat(storedMime);
  if (params.format !== null) {
    const format = params.format as DeliveryFormat;
    if (format === stored && params.width === null) return { kind: "original", varyAccept: false };
    return { kind: "variant", width: params.width ?? 0, format, varyAccept: false };
  }
  const negotiable = (stored === "jpeg" || stored === "png") && processFormats.includes("webp");
  if (negotiable && acceptsWebp(acceptHeader)) {
    return { kind: "variant", width: params.width ?? 0, format: "webp", varyAccept: true };
  }
  if (params.width !== null) {
    // A stored type we cannot write back (should not exist: uploads are sniffed) is resized
    // to PNG, which is lossless and readable everywhere.
    return { kind: "variant", width: params.width, format: stored ?? "png", varyAccept: negotiable };
  }
  return { kind: "original", varyAccept: negotiable };
}

/**
 * True when Accept lists `image/webp` with q > 0. Wildcards (`image/*`, `*\/*`) do not count:
 * browsers send them for every image request whether or not they decode WebP, and the spec
 * asks for `image/webp` itself. An explicit `image/webp;q=0` is a refusal.
 */
export function acceptsWebp(acceptHeader: string | null | undefined): boolean {
  if (!acceptHeader) return false;
  // Browsers send one of a few fixed Accept strings on every image request: remember the answers.
  const known = webpByAccept.get(acceptHeader);
  if (known !== undefined) return known;
  const answer = parseAcceptsWebp(acceptHeader);
  if (webpByAccept.size >= 256) webpByAccept.clear();
  webpByAccept.set(acceptHeader, answer);
  return answer;
}

const webpByAccept = new Map<string, boolean>();

function parseAcceptsWebp(acceptHeader: string): boolean {
  let accepted = false;
  for (const range of acceptHeader.split(",")) {
    const [type, ...paramParts] = range.split(";");
    if (type!.trim().toLowerCase() !== "image/webp") continue;
    const q = qValue(paramParts);
    // Several `image/webp` entries: any refusal wins (a duplicate is ambiguous; stay safe).
    if (q <= 0) return false;
    accepted = true;
  }
  return accepted;
}

function qValue(params: string[]): number {
  for (const p of params) {
    const eq = p.indexOf("=");
    if (eq < 0 || p.slice(0, eq).trim().toLowerCase() !== "q") continue;
    const raw = p.slice(eq + 1).trim();
    const q = Number(raw);
    // A malformed weight counts as the default 1, as most servers do.
    return raw !== "" && Number.isFinite(q) ? q : 1;
  }
  return 1;
}
