// Chooses what `/i/{id}` answers with: the stored original, or a variant (resized and/or
// converted), and whether the answer depends on `Accept` (spec 4.5 rule 1).
import { APNG_MIME } from "../images/sniff";
import { qValue } from "../shared/q-value";
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

/** What negotiation needs to know of the stored image: its type and displayed size. */
export interface StoredImage {
  mime: string;
  width: number;
  height: number;
}

/** libwebp's limit on either side: a larger WebP cannot be encoded at all. */
export const WEBP_MAX_SIDE = 16383;

/** The displayed size of a render at `width` (0 = unchanged; never enlarged). */
function renderedSize(stored: StoredImage, width: number): { width: number; height: number } {
  if (width === 0 || width >= stored.width) return { width: stored.width, height: stored.height };
  return { width, height: Math.max(1, Math.round((stored.height * width) / stored.width)) };
}

/**
 * Rule 1: without an explicit format, a stored JPEG/PNG becomes WebP when the client lists
 * `image/webp` and WebP is enabled. Whenever that decision was possible (whatever its outcome)
 * the response varies on Accept, so caches never hand a WebP to a client that did not ask.
 * `w` without a format keeps the (negotiated or) stored format, so animated GIF/WebP stay
 * animated. An explicit format equal to the stored one without `w` is just the original.
 *
 * What a render could only make worse is the original instead (image-fidelity audit):
 * - an APNG without an explicit format (a WebP or a resized PNG would be a still frame);
 * - a WebP beyond libwebp's 16383 px (it fails, and the fallback original is uncacheable);
 * - `w` at or above the stored width in the stored format (a same-size re-encode, bigger and
 *   a generation worse); a negotiated WebP at such a `w` is the one WebP of the full size.
 */
export function chooseRepresentation(
  stored: StoredImage,
  params: DeliveryParams,
  acceptHeader: string | null | undefined,
  processFormats: readonly string[],
): Representation {
  const format = mimeToFormat(stored.mime);
  const width = params.width === null ? 0 : params.width >= stored.width ? 0 : params.width;
  const apng = stored.mime === APNG_MIME;
  if (params.format !== null) {
    const asked = params.format as DeliveryFormat;
    // The stored format at (at least) its own size is the stored file; an APNG asked as PNG at any size too.
    if (apng ? asked === "png" : asked === format && width === 0) return { kind: "original", varyAccept: false };
    return { kind: "variant", width, format: asked, varyAccept: false };
  }
  if (apng) return { kind: "original", varyAccept: false };
  const output = renderedSize(stored, width);
  const webpFits = output.width <= WEBP_MAX_SIDE && output.height <= WEBP_MAX_SIDE;
  const negotiable = (format === "jpeg" || format === "png") && processFormats.includes("webp") && webpFits;
  if (negotiable && acceptsWebp(acceptHeader)) return { kind: "variant", width, format: "webp", varyAccept: true };
  // A stored type we cannot write back (should not exist: uploads are sniffed) is resized
  // to PNG, which is lossless and readable everywhere.
  if (width > 0) return { kind: "variant", width, format: format ?? "png", varyAccept: negotiable };
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

/** How many Accept answers are remembered: bounded, whatever variety of headers clients send (tests read it). */
export const rememberedAcceptAnswers = () => webpByAccept.size;

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
