import type { AppContext } from "../context";
import { channelList } from "../channels/views";

/**
 * The full metadata export (spec 2.12): every user, channel, token, image reference, blob and
 * replica row. Channel credentials, password hashes and token hashes are never included.
 */
export function metadataExport(app: AppContext) {
  const all = <T>(sql: string) => app.db.query<T, []>(sql).all();
  return {
    users: app.users.list(),
    channels: channelList(app).items,
    tokens: all("SELECT id, user_id, name, prefix, scopes, revoked_at, created_at FROM tokens ORDER BY id"),
    images: all<Record<string, unknown>>(
      `SELECT id, blob_id, user_id, token_id, file_name, object_key, expire_at, ttl_seconds, last_public_access_at,
              access_count, pending_cleanup, cleanup_exempt, created_at FROM images ORDER BY created_at, rowid`,
    ).map((r) => ({ ...r, pending_cleanup: !!r.pending_cleanup, cleanup_exempt: !!r.cleanup_exempt })),
    blobs: all<Record<string, unknown>>(
      "SELECT id, sha256, phash, storage_key, mime, size, width, height, ref_count, pending_delete, delete_after, created_at FROM blobs ORDER BY id",
    ).map((r) => ({ ...r, pending_delete: !!r.pending_delete })),
    blob_channels: all("SELECT blob_id, channel_id, state, attempts, last_error, updated_at FROM blob_channels ORDER BY blob_id, channel_id"),
  };
}
