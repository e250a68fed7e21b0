import type { AppContext } from "../context";
import { listOpenAlerts } from "./alerts";
import { perUserUsage, reviewCounts, type TopImageRow, topImageRows } from "./repos/dashboard";
import { channelUsage, libraryUsage, userUsage } from "./repos/usage";

const TOP_IMAGES = 10;

interface TopImage extends TopImageRow {
  url: string;
}

/** The most accessed images, each with its /i/ link. */
function topImages(app: AppContext, userId?: string): TopImage[] {
  return topImageRows(app.db, TOP_IMAGES, userId).map((r) => ({ ...r, url: `/i/${r.id}` }));
}

/** From the usage rollups: one row per user, not one per image. */
function totals(app: AppContext, userId?: string) {
  const u = userId ? userUsage(app.db, userId) : libraryUsage(app.db);
  return { images: u.images, storage_bytes: u.bytes, total_accesses: u.accesses, traffic: u.traffic };
}

/** Spec 2.13: the administrator's overview. `channels` is what tells it apart from the user view. */
export async function adminDashboard(app: AppContext) {
  const counts = await reviewCounts(app.db);
  const t = totals(app);
  const usage = channelUsage(app.db);
  const channels = app.channels.list();
  // Off-site: a healthy, non-draining channel that is not the local disk.
  const offsite = channels.some((c) => c.healthy && !c.row.deleting && c.row.driver !== "local");
  return {
    offsite_missing: !offsite,
    images: t.images,
    storage_bytes: t.storage_bytes,
    users: counts.users,
    pending_cleanup: counts.pending_cleanup,
    pending_dedup: counts.pending_dedup,
    total_accesses: t.total_accesses,
    traffic_estimate_bytes: t.traffic,
    top_images: topImages(app),
    per_user: perUserUsage(app.db),
    channels: channels.map((c) => ({ id: c.row.id, name: c.row.name, driver: c.row.driver, healthy: c.healthy, bytes: usage.get(c.row.id)?.bytes ?? 0 })),
    // Spec 6.2: alerts appear on the dashboard; the open ones, as GET /api/admin/alerts lists them.
    alerts: listOpenAlerts(app),
  };
}

/** A regular user's own usage. */
export function userDashboard(app: AppContext, userId: string) {
  const t = totals(app, userId);
  return {
    images: t.images,
    storage_bytes: t.storage_bytes,
    quota_bytes: app.users.byId(userId)?.quota_bytes ?? null,
    total_accesses: t.total_accesses,
    traffic_estimate_bytes: t.traffic,
    top_images: topImages(app, userId),
  };
}
