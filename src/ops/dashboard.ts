import type { AppContext } from "../context";
import { LISTABLE_DEDUP } from "../images/repos/review";
import { listOpenAlerts } from "./alerts";
import { channelUsage, libraryUsage, userUsage } from "./repos/usage";

const TOP_IMAGES = 10;

interface TopImage {
  id: string;
  url: string;
  file_name: string;
  access_count: number;
  size: number;
}

/** The first rows of images_top / images_user_top (migration 0007): no sort over the library. */
function topImages(app: AppContext, userId?: string): TopImage[] {
  const where = userId ? "WHERE i.user_id = ?" : "";
  const args = userId ? [userId] : [];
  return app.db
    .query<Omit<TopImage, "url">, string[]>(
      `SELECT i.id, i.file_name, i.access_count, b.size FROM images i ${userId ? "INDEXED BY images_user_top" : "INDEXED BY images_top"}
       JOIN blobs b ON b.id = i.blob_id ${where}
       ORDER BY i.access_count DESC, i.created_at DESC LIMIT ${TOP_IMAGES}`,
    )
    .all(...args)
    .map((r) => ({ ...r, url: `/i/${r.id}` }));
}

/** From the usage rollups: one row per user, not one per image. */
function totals(app: AppContext, userId?: string) {
  const u = userId ? userUsage(app.db, userId) : libraryUsage(app.db);
  return { images: u.images, storage_bytes: u.bytes, total_accesses: u.accesses, traffic: u.traffic };
}

/** Images, bytes and estimated traffic of every user (the dashboard's per-user table), from the usage rollup. */
function perUser(app: AppContext) {
  return app.db
    .query<{ id: string; name: string; images: number; storage_bytes: number; total_accesses: number; traffic_estimate_bytes: number }, []>(
      `SELECT u.id, u.name, COALESCE(uu.images, 0) AS images, COALESCE(uu.bytes, 0) AS storage_bytes,
              COALESCE(uu.accesses, 0) AS total_accesses, COALESCE(uu.traffic, 0) AS traffic_estimate_bytes
       FROM users u LEFT JOIN user_usage uu ON uu.user_id = u.id
       ORDER BY storage_bytes DESC, u.name`,
    )
    .all();
}

/** Spec 2.13: the administrator's overview. `channels` is what tells it apart from the user view. */
export function adminDashboard(app: AppContext) {
  const t = totals(app);
  const count = (sql: string) => app.db.query<{ n: number }, []>(sql).get()!.n;
  const usage = channelUsage(app.db);
  const channels = app.channels.list();
  // Off-site: a healthy, non-draining channel that is not the local disk.
  const offsite = channels.some((c) => c.healthy && !c.row.deleting && c.row.driver !== "local");
  return {
    offsite_missing: !offsite,
    images: t.images,
    storage_bytes: t.storage_bytes,
    users: count("SELECT COUNT(*) AS n FROM users"),
    pending_cleanup: count("SELECT COUNT(*) AS n FROM images WHERE pending_cleanup = 1 AND cleanup_exempt = 0"),
    pending_dedup: count(`SELECT COUNT(*) AS n ${LISTABLE_DEDUP}`),
    total_accesses: t.total_accesses,
    traffic_estimate_bytes: t.traffic,
    top_images: topImages(app),
    per_user: perUser(app),
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
