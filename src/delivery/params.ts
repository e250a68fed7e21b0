// Query parameters of the image delivery endpoints (`/i/{id}`, `/o/...`, thumb), spec 4.5.
// Only `w` and `format` mean anything; every other parameter is ignored so that cache-busting
// or tracking parameters added by third parties never turn into a 400.
import { Invalid } from "../errors";

/**
 * A malformed `w` or `format`: each surface maps it to 400 with a JSON envelope (spec 7: the
 * one image-access error that is not plain text).
 */
export class InvalidParamsError extends Invalid {
  constructor(message: string) {
    super(message, "malformed");
    this.name = "InvalidParamsError";
  }
}

export interface DeliveryParams {
  /** Requested width in pixels, always one of `process_widths`; null = no resizing. */
  width: number | null;
  /** Explicit output format (lower case, one of `process_formats`); null = absent or `auto`. */
  format: string | null;
}

export interface DeliveryParamSettings {
  process_widths: readonly number[] | null;
  process_formats: readonly string[];
}

// Plain decimal digits only: "1e3", "+640", "640.0" or " 640" are not widths a client can
// have meant as a canonical variant URL, and accepting them would multiply cache keys.
const DIGITS = /^[0-9]{1,6}$/;

/**
 * Validates `w` and `format`. With repeated parameters the first value wins
 * (URLSearchParams.get), matching how the CDN purge list writes URLs.
 */
export function parseDeliveryParams(query: URLSearchParams, s: DeliveryParamSettings): DeliveryParams {
  return { width: parseWidth(query.get("w"), s.process_widths), format: parseFormat(query.get("format"), s.process_formats) };
}

const NO_PARAMS: Readonly<DeliveryParams> = Object.freeze({ width: null, format: null });

/**
 * The same from a raw query string (without `?`). Most image requests have none, and then no
 * URLSearchParams is built at all.
 */
export function parseDeliveryQuery(query: string, s: DeliveryParamSettings): DeliveryParams {
  if (query === "") return NO_PARAMS;
  // Without `%` or `+` nothing is decoded, so splitting by hand reads exactly what
  // URLSearchParams would (first value wins), without building one.
  if (query.includes("%") || query.includes("+")) return parseDeliveryParams(new URLSearchParams(query), s);
  let w: string | null = null;
  let format: string | null = null;
  for (const part of query.split("&")) {
    const eq = part.indexOf("=");
    const name = eq < 0 ? part : part.slice(0, eq);
    if (name === "w" && w === null) w = eq < 0 ? "" : part.slice(eq + 1);
    else if (name === "format" && format === null) format = eq < 0 ? "" : part.slice(eq + 1);
  }
  return { width: parseWidth(w, s.process_widths), format: parseFormat(format, s.process_formats) };
}

function parseWidth(raw: string | null, allowed: readonly number[] | null): number | null {
  if (raw === null) return null;
  if (!allowed || allowed.length === 0) throw new InvalidParamsError("当前未开放缩放，不支持参数 w");
  if (!DIGITS.test(raw)) throw new InvalidParamsError("参数 w 必须是整数像素宽度");
  const width = Number(raw);
  if (!allowed.includes(width)) {
    throw new InvalidParamsError(`参数 w 不在允许的宽度内（可用：${[...allowed].sort((a, b) => a - b).join(", ")}）`);
  }
  return width;
}

function parseFormat(raw: string | null, allowed: readonly string[]): string | null {
  if (raw === null) return null;
  // Case-insensitive: `format=WEBP` is an obvious intent; the result is always lower case so
  // cache keys and ETags stay canonical.
  const format = raw.trim().toLowerCase();
  if (format === "auto") return null;
  if (!allowed.includes(format)) {
    const list = allowed.length ? [...allowed, "auto"].join(", ") : "auto";
    throw new InvalidParamsError(`参数 format 无效（可用：${list}）`);
  }
  return format;
}
