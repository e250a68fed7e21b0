// Chevereto V4's `expiration` upload parameter (app/legacy/routes/api.php, then
// Image::uploadToWebsite in app/src/Legacy/Classes/Image.php) as a Kura lifetime in seconds,
// which the upload pipeline then checks like the native `ttl`.
import { Invalid } from "../errors";

/** Chevereto's shortest and longest choice (Image::$expirations: 5 minutes … 1 year, in seconds). */
const MIN_SECONDS = 300;
const MAX_SECONDS = 31_536_000;

/**
 * The choices Chevereto offers (getAvailableExpirations: PT5M … PT12H, P1D … P3W, P1M … P6M, P1Y)
 * are added as calendar intervals, unclamped. Every one of them but a year always lies within the
 * clamp anyway; a year that spans a 29 February is 366 days, one past it, and stays so.
 */
const OFFERED_YEAR = "P1Y";

/** ISO-8601 durations as PHP's DateInterval reads them: whole numbers, weeks may be combined with days. */
const DURATION = /^P(?:(\d+)Y)?(?:(\d+)M)?(?:(\d+)W)?(?:(\d+)D)?(?:T(?=\d)(?:(\d+)H)?(?:(\d+)M)?(?:(\d+)S)?)?$/;

/** A duration past what a Date holds (P99999999999Y) is NaN: the longest choice then. */
const clamp = (seconds: number) => (Number.isFinite(seconds) ? Math.min(MAX_SECONDS, Math.max(MIN_SECONDS, seconds)) : MAX_SECONDS);

/** Seconds from `now` to `now` plus the duration, months and years on the UTC calendar as DateTime::add does. */
function durationSeconds(match: RegExpExecArray, now: number): number {
  const [years, months, weeks, days, hours, minutes, seconds] = match.slice(1).map((part) => Number(part ?? 0)) as number[];
  const end = new Date(now);
  end.setUTCFullYear(end.getUTCFullYear() + years!, end.getUTCMonth() + months!, end.getUTCDate() + weeks! * 7 + days!);
  return Math.ceil((end.getTime() - now) / 1000) + hours! * 3600 + minutes! * 60 + seconds!;
}

/**
 * `expiration` → seconds, or undefined when absent (the user's and the global default apply).
 * Like Chevereto: whole seconds (`0` is no expiration, as its array_filter drops it) or an
 * ISO-8601 duration; the offered choices as they are, anything else clamped to 5 minutes … 1 year.
 * Unlike Chevereto, which silently turns an unreadable value into its 5-minute minimum, an
 * unreadable value is refused (400, nothing stored): a typo should not delete the image in 5 minutes.
 */
export function cheveretoExpirationSeconds(value: string | undefined, now = Date.now()): number | undefined {
  const text = value?.trim().toUpperCase() ?? "";
  if (text === "" || /^0+$/.test(text)) return undefined;
  if (/^\d+$/.test(text)) return clamp(Number(text));
  const match = text.length > 1 ? DURATION.exec(text) : null;
  if (!match) throw new Invalid("expiration 必须是 ISO-8601 时长（如 PT5M、PT1H、P3D、P1W、P1M、P1Y）或整数秒");
  const seconds = durationSeconds(match, now);
  return text === OFFERED_YEAR ? seconds : clamp(seconds);
}
