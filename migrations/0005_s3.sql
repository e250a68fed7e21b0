-- S3-compatible upload surface (/s3/).
-- ETags are the MD5 of the object; kept per blob (all references share the bytes), '' until known.
ALTER TABLE blobs ADD COLUMN md5 TEXT NOT NULL DEFAULT '';
-- JSON of the x-amz-meta-* headers and Content-Type given at PutObject, returned on HEAD/GET.
ALTER TABLE images ADD COLUMN s3_meta TEXT NOT NULL DEFAULT '';
-- Open multipart uploads; their parts live under <tmp>/multipart/<upload_id>/.
CREATE TABLE multipart_uploads (
  upload_id   TEXT PRIMARY KEY,
  user_id     TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
  token_id    INTEGER,
  object_key  TEXT NOT NULL,
  meta        TEXT NOT NULL DEFAULT '{}',
  created_at  TEXT NOT NULL
);
