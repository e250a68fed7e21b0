import type { AppContext } from "../context";
import type { ImageView } from "./repo";

/**
 * The view as `viewer` may see it: an administrator sees how many references the blob has
 * in all, a user only their own ones (whether anyone else stored the same bytes is not
 * theirs to learn).
 */
export function asSeenBy(app: AppContext, viewer: { id: string; role: string }, v: ImageView): ImageView {
  if (viewer.role === "admin") return v;
  return { ...v, ref_count: app.images.ownReferences(v.blob_id, viewer.id) };
}

/** The list item of spec 2.6. */
export function imageItem(v: ImageView) {
  return {
    id: v.id,
    url: `/i/${v.id}`,
    user_id: v.user_id,
    token_id: v.token_id,
    token_name: v.token_id === null ? null : v.token_name,
    file_name: v.file_name,
    mime: v.mime,
    size: v.size,
    width: v.width,
    height: v.height,
    sha256: v.sha256,
    expire_at: v.expire_at,
    ttl_seconds: v.ttl_seconds,
    last_access_at: v.last_public_access_at,
    access_count: v.access_count,
    pending_cleanup: !!v.pending_cleanup,
    cleanup_exempt: !!v.cleanup_exempt,
    created_at: v.created_at,
    ref_count: v.ref_count,
  };
}

/**
 * Detail adds replicas, ordered by channel priority descending. The replicas are the blob's, which
 * every reference to the same bytes shares: for a regular user a replica settled before their
 * upload shows their upload's time, since a time before it would tell that someone else had stored
 * these bytes first (the same oracle `asSeenBy` closes for ref_count).
 */
export function imageDetail(app: AppContext, v: ImageView, viewer: { role: string }) {
  const floor = viewer.role === "admin" ? "" : v.created_at;
  const channels = app.channels.list();
  const rank = new Map(channels.map((c, i) => [c.row.id, i]));
  const names = new Map(channels.map((c) => [c.row.id, c.row.name]));
  const replicas = app.images
    .replicas(v.blob_id)
    .filter((r) => names.has(r.channel_id))
    .sort((a, b) => rank.get(a.channel_id)! - rank.get(b.channel_id)!)
    .map((r) => ({
      channel_id: r.channel_id,
      channel_name: names.get(r.channel_id)!,
      state: r.state,
      attempts: r.attempts,
      last_error: r.last_error,
      // biome-ignore lint/complexity/useMathMinMax: SQL times are strings, compared as text
      updated_at: r.updated_at < floor ? floor : r.updated_at,
    }));
  return { ...imageItem(v), replicas };
}
