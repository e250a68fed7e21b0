import { z } from "zod";

/** Durations are capped at 100 years in the setting's own unit (spec 4.2). */
const CAP = {
  ms: 3_153_600_000_000,
  seconds: 3_153_600_000,
  minutes: 52_560_000,
  hours: 876_000,
  days: 36_500,
} as const;

const int = (min: number, max: number) => z.number().int().min(min).max(max);
const duration = (unit: keyof typeof CAP, min = 0) => int(min, CAP[unit]);

const httpUrlOrEmpty = z
  .string()
  .max(2048)
  .refine((v) => v === "" || (/^https?:\/\/[^\s/]+(\/[^\s]*)?$/i.test(v) && URL.canParse(v)), "必须为空或 http(s) 地址");

/** No user or password in the address: the webhook sends no authentication header (spec 5 rule 13). */
const webhookUrl = httpUrlOrEmpty.refine((v) => {
  const url = URL.parse(v);
  return v === "" || !url || (!url.username && !url.password);
}, "不能包含用户名或密码");

/**
 * The public site address links are built on (`<base_url>/i/<id>`): scheme, host, optional port
 * and path, nothing a link would break on. A query or fragment would swallow the rest of every
 * link, and characters URL parsing would escape (`"`, `<`) would reach the HTML and BBCode links
 * unescaped: the path must read the same after parsing.
 */
const baseUrl = httpUrlOrEmpty.refine((v) => {
  if (v === "") return true;
  // Checks run on after a failed one: an unparsable value is the first refinement's to report.
  const url = URL.parse(v);
  if (!url) return true;
  if (v.endsWith("/")) return false;
  const rawPath = v.replace(/^https?:\/\/[^/]*/i, "");
  return (
    !url.username && !url.password && !url.search && !url.hash && !v.includes("?") && !v.includes("#") && rawPath === (url.pathname === "/" ? "" : url.pathname)
  );
}, "必须是 http(s) 地址（协议、主机、可选端口和路径），不能以 / 结尾，不能带查询参数、锚点或需要转义的字符");

/**
 * `https://img.example.com/` is what people paste (a browser's address bar adds the slash): it is
 * the same site, so the trailing slashes go instead of refusing the value. Only after an http(s)
 * host, so nothing else changes meaning.
 */
const withoutTrailingSlashes = (v: unknown) => (typeof v === "string" && /^https?:\/\/[^/\s]+/i.test(v) ? v.replace(/\/+$/, "") : v);

export const PROCESS_FORMATS = ["webp", "jpeg", "png", "avif", "gif"] as const;

/** Highest accepted `max_upload_mb`; it also bounds every request body the server reads. */
export const MAX_UPLOAD_MB_LIMIT = 10_240;

const settingsShape = {
  max_upload_mb: int(1, MAX_UPLOAD_MB_LIMIT),
  max_pixels_mp: int(1, 1_000),
  max_concurrent_uploads: int(1, 10_000),
  upload_rate_per_min: int(1, 1_000_000),
  upload_idle_timeout_seconds: duration("seconds", 1),
  base_url: z.preprocess(withoutTrailingSlashes, baseUrl),
  cdn_provider_zone_id: z.string().max(256),
  cdn_provider_api_token: z.string().max(1024),
  alert_webhook_url: webhookUrl,
  allow_empty_referer: z.boolean(),
  ttl_renew_on_access: z.boolean(),
  encrypt_new_channels: z.boolean(),
  exif_policy: z.enum(["passthrough", "strip"]),
  access_mode: z.enum(["proxy", "redirect"]),
  min_success: int(1, 100),
  health_check_seconds: duration("seconds", 1),
  backup_interval_hours: duration("hours", 1),
  backup_keep: int(1, 10_000),
  cleanup_sweep_seconds: duration("seconds", 1),
  // A change re-times the physical deletes already waiting (images/delete.ts, retimePendingDeletes).
  delete_grace_minutes: duration("minutes"),
  default_ttl_hours: duration("hours"),
  activity_flush_seconds: duration("seconds", 1),
  cold_cleanup_days: duration("days"),
  usage_report_seconds: duration("seconds", 1),
  channel_quota_gb: int(0, 1_000_000_000),
  dedup_scan_seconds: duration("seconds", 1),
  dedup_phash_max_distance: int(0, 64),
  process_widths: z.array(int(1, 16_384)).max(64).nullable(),
  process_formats: z.array(z.enum(PROCESS_FORMATS)).max(PROCESS_FORMATS.length),
  process_quality_webp: int(1, 100),
  process_quality_jpeg: int(1, 100),
  process_webp_method: int(0, 6),
  process_workers: int(1, 64),
  process_timeout_ms: duration("ms", 100),
  variants_cache_mb: int(0, 10_485_760),
  idempotency_key_ttl_hours: duration("hours", 1),
  s3_multipart_expiry_hours: duration("hours", 1),
  audit_retention_days: duration("days", 1),
};

export type Settings = { [K in keyof typeof settingsShape]: z.infer<(typeof settingsShape)[K]> };
export type SettingKey = keyof Settings;

/** Defaults for a new installation; the README's settings table mirrors this object. */
export const DEFAULT_SETTINGS: Settings = {
  max_upload_mb: 20,
  max_pixels_mp: 100,
  max_concurrent_uploads: 16,
  upload_rate_per_min: 120,
  // nginx's client_body_timeout: long enough for a phone that loses signal for a while.
  upload_idle_timeout_seconds: 60,
  base_url: "",
  cdn_provider_zone_id: "",
  cdn_provider_api_token: "",
  alert_webhook_url: "",
  allow_empty_referer: true,
  ttl_renew_on_access: false,
  encrypt_new_channels: false,
  exif_policy: "strip",
  access_mode: "proxy",
  min_success: 1,
  health_check_seconds: 60,
  backup_interval_hours: 24,
  backup_keep: 7,
  cleanup_sweep_seconds: 300,
  delete_grace_minutes: 60,
  default_ttl_hours: 0,
  activity_flush_seconds: 30,
  cold_cleanup_days: 0,
  usage_report_seconds: 300,
  channel_quota_gb: 0,
  dedup_scan_seconds: 3600,
  dedup_phash_max_distance: 6,
  process_widths: [320, 640, 960, 1280, 1920],
  process_formats: ["webp", "jpeg", "png", "avif"],
  process_quality_webp: 80,
  process_quality_jpeg: 82,
  process_webp_method: 4,
  process_workers: 2,
  process_timeout_ms: 15_000,
  variants_cache_mb: 1024,
  idempotency_key_ttl_hours: 24,
  s3_multipart_expiry_hours: 24,
  audit_retention_days: 365,
};

/** Keys sealed with the master key at rest and blanked on every read. */
export const SECRET_SETTINGS: ReadonlySet<SettingKey> = new Set(["cdn_provider_api_token"]);

/** Strict: an unknown key rejects the whole patch. */
export const settingsPatchSchema = z.strictObject(settingsShape).partial();

/** Login limiter parameters, fixed, shown under `derived`. */
export const LOGIN_BURST = 5;
export const LOGIN_REFILL_SECONDS = 60;
export const RECONCILE_INTERVAL_SECONDS = 86_400;
