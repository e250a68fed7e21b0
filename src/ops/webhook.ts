/**
 * Alert webhook delivery (spec 6.1). `openAlert`/`resolveAlert` leave a transition
 * undelivered when a webhook is configured; each evaluation round calls
 * `deliverAlertWebhooks`, which sends the pending transitions in alert id order,
 * the open one of an alert always before its resolved one. A 2xx marks the
 * transition delivered; anything else is retried on the next round.
 */
import type { AppContext } from "../context";
import { networkFailureReason } from "../channels/drivers/driver-errors";
import type { AddressSet } from "../net/cidr";
import { checkedAddress, pinnedRequest, resolveWithOs, UrlImportError } from "../net/safe-fetch";
import { alertMessage, markAlertDelivered, undeliveredAlerts, type PendingAlert } from "./repo";

/** Spec 6.1 rule 1: a delivery attempt gives up after 10 seconds. */
export const WEBHOOK_TIMEOUT_MS = 10_000;

type WebhookApp = Pick<AppContext, "db" | "log" | "settings" | "bootstrap">;

export interface WebhookPayload {
  kind: string;
  target: string;
  message: string;
  status: "open" | "resolved";
  opened_at: string;
  resolved_at?: string;
}

/** The fixed payload (spec 6.1 rule 4); `resolved_at` only on the resolved delivery. */
export function webhookPayload(alert: PendingAlert, status: "open" | "resolved"): WebhookPayload {
  const base = { kind: alert.kind, target: alert.target, message: alert.message, status, opened_at: alert.opened_at };
  return status === "resolved" ? { ...base, resolved_at: alert.resolved_at } : base;
}

/**
 * Why a delivery failed, without the webhook address (it may carry a secret in its query).
 * The target goes through the same public-address policy as URL import (resolved once,
 * pinned, every address public or in KURA_WEBHOOK_ALLOW), and redirects are not followed:
 * a redirect would carry the alert to an address nobody checked.
 */
async function post(url: string, payload: WebhookPayload, allow: AddressSet): Promise<string | null> {
  let target: URL;
  try {
    target = new URL(url);
  } catch {
    return "地址无效";
  }
  try {
    const signal = AbortSignal.timeout(WEBHOOK_TIMEOUT_MS);
    const address = await checkedAddress(target.hostname, resolveWithOs, allow, signal);
    // No authentication header (spec 5 rule 13): a user and password in the URL are not sent (the
    // settings refuse them; a value saved before that rule carries them unused). Identity encoding:
    // the answer is never read, so nothing may ask for it compressed.
    const headers: Record<string, string> = { "content-type": "application/json", "user-agent": "Kura-Alert-Webhook/1", "accept-encoding": "identity" };
    target.username = "";
    target.password = "";
    const res = await pinnedRequest(target, address, { method: "POST", headers, body: JSON.stringify(payload), signal });
    // Only the status counts (spec 6.1 rule 1): the body is cancelled unread, so a receiver that
    // answers with an endless body or a compression bomb costs nothing (it was read whole).
    await res.body?.cancel().catch(() => undefined);
    if (res.status >= 300 && res.status < 400) return `HTTP ${res.status}（不跟随重定向）`;
    return res.status >= 200 && res.status < 300 ? null : `HTTP ${res.status}`;
  } catch (err) {
    if (err instanceof UrlImportError) return err.message;
    const e = err as Error & { code?: string };
    if (e.name === "TimeoutError") return "超时";
    // Bun's own words ("Unable to connect. Is the computer able to access the url?") never reach the log.
    return networkFailureReason(err);
  }
}

/** The webhook address for audit and display: scheme, host and path, never userinfo or query. */
export function redactWebhookUrl(url: string): string {
  if (url === "") return "";
  try {
    const u = new URL(url);
    return `${u.protocol}//${u.host}${u.pathname}`;
  } catch {
    return "(invalid)";
  }
}

/**
 * One delivery round. Stops at the first failure: the receiver is most likely down,
 * and waiting 10 seconds per pending alert would stall the evaluation loop; keeping
 * id order also means later transitions never overtake earlier ones.
 */
export async function deliverAlertWebhooks(app: WebhookApp): Promise<void> {
  const url = app.settings.get().alert_webhook_url;
  // Without a webhook, pending transitions (made while one was set) wait for the next one.
  if (!url) return;
  const pending = undeliveredAlerts(app.db);
  for (const alert of pending) {
    const steps: Array<"open" | "resolved"> = [];
    if (!alert.open_delivered) steps.push("open");
    if (alert.resolved_at !== "" && !alert.resolved_delivered) steps.push("resolved");
    for (const status of steps) {
      // The message may have been refreshed by an evaluation since the list was read.
      const payload = webhookPayload({ ...alert, message: alertMessage(app.db, alert.id) ?? alert.message }, status);
      const failure = await post(url, payload, app.bootstrap.webhookAllow);
      if (failure !== null) {
        app.log.warn("告警通知发送失败，将在下一轮重试", { kind: alert.kind, target: alert.target, status, err: failure });
        return;
      }
      markAlertDelivered(app.db, alert.id, status);
      app.log.info("告警通知已发送", { kind: alert.kind, target: alert.target, status });
    }
  }
}
