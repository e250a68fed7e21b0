-- S3 client safety (issue 11) and multipart limits (issue 9).
-- Bytes of the parts stored so far, counted against the owner's quota until Complete or Abort.
ALTER TABLE multipart_uploads ADD COLUMN staged_bytes INTEGER NOT NULL DEFAULT 0;
CREATE INDEX multipart_uploads_user ON multipart_uploads (user_id, object_key, upload_id);
CREATE INDEX multipart_uploads_created ON multipart_uploads (created_at);
-- Zero-byte "folder" objects (keys ending in /) that GUI clients create; listed, never images.
CREATE TABLE s3_folder_markers (
  user_id     TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
  object_key  TEXT NOT NULL,
  created_at  TEXT NOT NULL,
  PRIMARY KEY (user_id, object_key)
) WITHOUT ROWID;
-- Why an image is in the cleanup review: NULL/'cold' (not accessed for cold_cleanup_days) or
-- 'superseded' (its S3 key / object_key alias was re-pointed to a later upload).
ALTER TABLE images ADD COLUMN cleanup_reason TEXT;
