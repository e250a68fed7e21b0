/**
 * Alerts (spec 3.3, 6.2): at most one open alert per kind and target (a
 * partial unique index enforces it). Opening and resolving are logged. The
 * webhook deliverer is not part of this module: a transition made while no
 * webhook is configured is marked delivered at once, so it is never sent later
 * (spec 6.1 rule 3); with a webhook set it stays undelivered for the deliverer.
 */
import type { AppContext } from "../context";
import { sqlTime } from "../db/time";
import { channelAlertStates, insertAlert, openAlertId, openAlertTargets, resolveOpenAlert, selectOpenAlerts, setAlertMessage } from "./repo";

export type AlertKind = "channel_unhealthy" | "replication_failed" | "channel_quota_exceeded" | "drain_failed" | "backup_failed";

type AlertApp = Pick<AppContext, "db" | "log" | "settings">;

const webhookConfigured = (app: AlertApp) => app.settings.get().alert_webhook_url !== "";

/** Opens the alert, or refreshes the message of the one already open. Returns true when newly opened. */
export function openAlert(app: AlertApp, kind: AlertKind, target: string, message: string): boolean {
  const open = openAlertId(app.db, kind, target);
  if (open !== undefined) {
    setAlertMessage(app.db, open, message);
    return false;
  }
  insertAlert(app.db, { kind, target, message, openedAt: sqlTime(), openDelivered: !webhookConfigured(app) });
  app.log.warn("告警已触发", { kind, target, message });
  return true;
}

/** Resolves the open alert of this kind and target, if any. Returns true when one was resolved. */
export function resolveAlert(app: AlertApp, kind: AlertKind, target: string): boolean {
  const changed = resolveOpenAlert(app.db, kind, target, sqlTime(), !webhookConfigured(app));
  if (changed > 0) app.log.info("告警已解除", { kind, target });
  return changed > 0;
}

export interface AlertItem {
  id: number;
  kind: AlertKind;
  target: string;
  message: string;
  opened_at: string;
  resolved_at: string;
}

/** Every unresolved alert, newest first: `GET /api/admin/alerts` and the dashboard (spec 6.2) show the same list. */
export function listOpenAlerts(app: Pick<AppContext, "db">): AlertItem[] {
  return selectOpenAlerts(app.db) as AlertItem[];
}

const openTargets = (app: AlertApp, kind: AlertKind): string[] => openAlertTargets(app.db, kind);

/** Opens/refreshes an alert for each target in `holding`, resolves the kind's other open alerts. */
function reconcile(app: AlertApp, kind: AlertKind, holding: Map<string, string>) {
  for (const [target, message] of holding) openAlert(app, kind, target, message);
  for (const target of openTargets(app, kind)) if (!holding.has(target)) resolveAlert(app, kind, target);
}

/**
 * One evaluation round of the channel alert kinds. `drain_failed` is opened by
 * the drain job itself on its first deletion failure; here it is only resolved
 * once the channel is gone (or no longer draining).
 */
export function evaluateChannelAlerts(app: AlertApp) {
  const channels = channelAlertStates(app.db);
  const inService = channels.filter((c) => !c.deleting);

  const unhealthy = new Map<string, string>();
  for (const c of inService) {
    if (c.healthy || (c.last_checked_at === "" && c.last_error === "")) continue;
    unhealthy.set(c.name, `存储渠道 ${c.name} 不健康：${c.last_error || "探测失败"}`);
  }
  reconcile(app, "channel_unhealthy", unhealthy);

  const replication = new Map<string, string>();
  for (const c of inService) if (c.failed > 0) replication.set(c.name, `存储渠道 ${c.name} 有 ${c.failed} 个副本复制失败`);
  reconcile(app, "replication_failed", replication);

  const quotaGb = app.settings.get().channel_quota_gb;
  const quota = new Map<string, string>();
  if (quotaGb > 0) {
    const limit = quotaGb * 1024 ** 3;
    for (const c of inService) {
      if (c.bytes > limit) quota.set(c.name, `存储渠道 ${c.name} 已用 ${(c.bytes / 1024 ** 3).toFixed(2)} GB，超过告警阈值 ${quotaGb} GB`);
    }
  }
  reconcile(app, "channel_quota_exceeded", quota);

  const draining = new Set(channels.filter((c) => c.deleting).map((c) => c.name));
  for (const target of openTargets(app, "drain_failed")) if (!draining.has(target)) resolveAlert(app, "drain_failed", target);
}
