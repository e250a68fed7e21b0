/**
 * SQL of the metadata export (spec 2.12): one statement per section after users and channels,
 * shared by the in-memory document (ops/export.ts) and the streamed one (ops/export-stream.ts).
 * Only listed columns: channel credentials, password hashes and token hashes are never read.
 */
export const EXPORT_SQL = {
  // Spec 2.12's fields, and the rest of the list item (2.4: the export "additionally carries
  // user_id"): without expires_at an expiring token read as permanent in the export.
  tokens: "SELECT id, user_id, name, prefix, scopes, expires_at, last_used_at, revoked_at, created_at FROM tokens ORDER BY id",
  // Upload order along the created_at index (rowid breaks ties): no sort of the whole table up front.
  images: `SELECT id, blob_id, user_id, token_id, file_name, object_key, expire_at, ttl_seconds, last_public_access_at,
                 access_count, pending_cleanup, cleanup_exempt, created_at FROM images ORDER BY created_at, rowid`,
  blobs: "SELECT id, sha256, phash, storage_key, mime, size, width, height, ref_count, pending_delete, delete_after, created_at FROM blobs ORDER BY id",
  blob_channels: "SELECT blob_id, channel_id, state, attempts, last_error, updated_at FROM blob_channels ORDER BY blob_id, channel_id",
} as const;

/** The streamed export's first read inside its transaction: it pins the snapshot every section is read from. */
export const SNAPSHOT_PIN_SQL = "SELECT COUNT(*) FROM schema_migrations";
