import type { AppContext } from "../context";
import { channelList } from "../channels/views";
import { EXPORT_SQL } from "./repos/export";

/**
 * The full metadata export (spec 2.12): every user, channel, token, image reference, blob and
 * replica row. Channel credentials, password hashes and token hashes are never included.
 */
export function metadataExport(app: AppContext) {
  const all = <T>(sql: string) => app.db.query<T, []>(sql).all();
  return {
    users: app.users.list(),
    channels: channelList(app).items,
    tokens: all(EXPORT_SQL.tokens),
    images: all<Record<string, unknown>>(EXPORT_SQL.images).map((r) => ({
      ...r,
      pending_cleanup: !!r.pending_cleanup,
      cleanup_exempt: !!r.cleanup_exempt,
    })),
    blobs: all<Record<string, unknown>>(EXPORT_SQL.blobs).map((r) => ({ ...r, pending_delete: !!r.pending_delete })),
    blob_channels: all(EXPORT_SQL.blob_channels),
  };
}
