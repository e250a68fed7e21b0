import type { AppContext } from "../context";
import { redactWebhookUrl } from "../ops/webhook";
import { BUILD } from "../version";
import { LOGIN_BURST, LOGIN_REFILL_SECONDS, RECONCILE_INTERVAL_SECONDS, SECRET_SETTINGS, type Settings } from "./settings-schema";

/** The read-only slice every logged-in user may read (spec 2.14): no credentials. */
export function publicConfig(s: Readonly<Settings>) {
  return {
    cold_cleanup_days: s.cold_cleanup_days,
    delete_grace_minutes: s.delete_grace_minutes,
    process_widths: s.process_widths,
    default_ttl_hours: s.default_ttl_hours,
    ttl_renew_on_access: s.ttl_renew_on_access,
    max_upload_mb: s.max_upload_mb,
    base_url: s.base_url,
    access_mode: s.access_mode,
    exif_policy: s.exif_policy,
    encrypt_new_channels: s.encrypt_new_channels,
    build: { ...BUILD },
  };
}

export function cdnPurgeEnabled(s: Readonly<Settings>): boolean {
  return !!(s.cdn_provider_zone_id && s.cdn_provider_api_token && s.base_url);
}

export function fullConfig(app: AppContext) {
  const s = app.settings.get();
  const settings: Record<string, unknown> = { ...s };
  for (const key of SECRET_SETTINGS) settings[key] = "";
  return {
    bootstrap: {
      listen: app.bootstrap.listen.text,
      data_dir: app.bootstrap.dataDir,
      trusted_proxies: app.bootstrap.trustedProxiesText,
      metrics_allow: app.bootstrap.metricsAllowText,
    },
    settings,
    derived: {
      cdn_purge_enabled: cdnPurgeEnabled(s),
      cdn_api_token_set: s.cdn_provider_api_token !== "",
      login_burst: LOGIN_BURST,
      login_refill_seconds: LOGIN_REFILL_SECONDS,
      reconcile_interval_seconds: RECONCILE_INTERVAL_SECONDS,
    },
  };
}

/** Audit detail of a config change: secret values become set/empty markers, never the value. */
export function configAuditDetail(patch: Record<string, unknown>): Record<string, unknown> {
  const detail: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(patch)) {
    if (SECRET_SETTINGS.has(key as never)) detail[key] = value === "" ? "(empty)" : "(set)";
    // Webhook URLs often carry a token in userinfo or query: only where it points is recorded.
    else if (key === "alert_webhook_url" && typeof value === "string") detail[key] = redactWebhookUrl(value);
    else detail[key] = value;
  }
  return detail;
}
