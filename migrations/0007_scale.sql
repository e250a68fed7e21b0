-- Scale: usage rollups, the near-duplicate index, file-name search and the indexes the
-- hot admin queries need at a million images.

-- Usage rollups. Triggers keep them in the same transaction as every statement that
-- changes images or replicas (upload, delete, merge, expiry, access flush, drain), so a
-- crash can never leave them out of step with the rows they summarise. A user's bytes
-- count each reference in full (spec quota rule); traffic is access_count × blob size.
CREATE TABLE user_usage (
  user_id  TEXT PRIMARY KEY,
  images   INTEGER NOT NULL DEFAULT 0,
  bytes    INTEGER NOT NULL DEFAULT 0,
  accesses INTEGER NOT NULL DEFAULT 0,
  traffic  INTEGER NOT NULL DEFAULT 0
) WITHOUT ROWID;

-- Per channel: done replicas (count and bytes), pending and failed replicas.
CREATE TABLE channel_usage (
  channel_id INTEGER PRIMARY KEY,
  blobs      INTEGER NOT NULL DEFAULT 0,
  bytes      INTEGER NOT NULL DEFAULT 0,
  pending    INTEGER NOT NULL DEFAULT 0,
  failed     INTEGER NOT NULL DEFAULT 0
);

INSERT INTO user_usage (user_id, images, bytes, accesses, traffic)
  SELECT i.user_id, COUNT(*), COALESCE(SUM(b.size), 0), COALESCE(SUM(i.access_count), 0), COALESCE(SUM(i.access_count * b.size), 0)
  FROM images i JOIN blobs b ON b.id = i.blob_id GROUP BY i.user_id;

INSERT INTO channel_usage (channel_id, blobs, bytes, pending, failed)
  SELECT bc.channel_id, COALESCE(SUM(bc.state = 'done'), 0), COALESCE(SUM(CASE WHEN bc.state = 'done' THEN b.size ELSE 0 END), 0),
         COALESCE(SUM(bc.state = 'pending'), 0), COALESCE(SUM(bc.state = 'failed'), 0)
  FROM blob_channels bc JOIN blobs b ON b.id = bc.blob_id GROUP BY bc.channel_id;

CREATE TRIGGER usage_image_insert AFTER INSERT ON images BEGIN
  INSERT INTO user_usage (user_id, images, bytes, accesses, traffic)
    SELECT NEW.user_id, 1, b.size, NEW.access_count, NEW.access_count * b.size FROM blobs b WHERE b.id = NEW.blob_id
    ON CONFLICT (user_id) DO UPDATE SET images = images + 1, bytes = bytes + excluded.bytes,
      accesses = accesses + excluded.accesses, traffic = traffic + excluded.traffic;
END;

CREATE TRIGGER usage_image_delete AFTER DELETE ON images BEGIN
  UPDATE user_usage SET images = images - 1,
    bytes = bytes - (SELECT size FROM blobs WHERE id = OLD.blob_id),
    accesses = accesses - OLD.access_count,
    traffic = traffic - OLD.access_count * (SELECT size FROM blobs WHERE id = OLD.blob_id)
  WHERE user_id = OLD.user_id;
END;

-- The access flush only changes access_count: one cheap update, no re-add.
CREATE TRIGGER usage_image_access AFTER UPDATE OF access_count ON images
  WHEN OLD.blob_id = NEW.blob_id AND OLD.user_id = NEW.user_id BEGIN
  UPDATE user_usage SET accesses = accesses + NEW.access_count - OLD.access_count,
    traffic = traffic + (NEW.access_count - OLD.access_count) * (SELECT size FROM blobs WHERE id = NEW.blob_id)
  WHERE user_id = NEW.user_id;
END;

-- A merge re-points blob_id (and an owner change would move user_id): take the old row out, put the new one in.
CREATE TRIGGER usage_image_move AFTER UPDATE OF blob_id, user_id ON images
  WHEN OLD.blob_id != NEW.blob_id OR OLD.user_id != NEW.user_id BEGIN
  UPDATE user_usage SET images = images - 1,
    bytes = bytes - (SELECT size FROM blobs WHERE id = OLD.blob_id),
    accesses = accesses - OLD.access_count,
    traffic = traffic - OLD.access_count * (SELECT size FROM blobs WHERE id = OLD.blob_id)
  WHERE user_id = OLD.user_id;
  INSERT INTO user_usage (user_id, images, bytes, accesses, traffic)
    SELECT NEW.user_id, 1, b.size, NEW.access_count, NEW.access_count * b.size FROM blobs b WHERE b.id = NEW.blob_id
    ON CONFLICT (user_id) DO UPDATE SET images = images + 1, bytes = bytes + excluded.bytes,
      accesses = accesses + excluded.accesses, traffic = traffic + excluded.traffic;
END;

CREATE TRIGGER usage_user_delete AFTER DELETE ON users BEGIN
  DELETE FROM user_usage WHERE user_id = OLD.id;
END;

CREATE TRIGGER usage_replica_insert AFTER INSERT ON blob_channels BEGIN
  INSERT INTO channel_usage (channel_id, blobs, bytes, pending, failed)
    SELECT NEW.channel_id, NEW.state = 'done', CASE WHEN NEW.state = 'done' THEN b.size ELSE 0 END, NEW.state = 'pending', NEW.state = 'failed'
    FROM blobs b WHERE b.id = NEW.blob_id
    ON CONFLICT (channel_id) DO UPDATE SET blobs = blobs + excluded.blobs, bytes = bytes + excluded.bytes,
      pending = pending + excluded.pending, failed = failed + excluded.failed;
END;

CREATE TRIGGER usage_replica_delete AFTER DELETE ON blob_channels BEGIN
  UPDATE channel_usage SET blobs = blobs - (OLD.state = 'done'),
    bytes = bytes - CASE WHEN OLD.state = 'done' THEN (SELECT size FROM blobs WHERE id = OLD.blob_id) ELSE 0 END,
    pending = pending - (OLD.state = 'pending'), failed = failed - (OLD.state = 'failed')
  WHERE channel_id = OLD.channel_id;
END;

CREATE TRIGGER usage_replica_update AFTER UPDATE OF state, blob_id, channel_id ON blob_channels
  WHEN OLD.state != NEW.state OR OLD.blob_id != NEW.blob_id OR OLD.channel_id != NEW.channel_id BEGIN
  UPDATE channel_usage SET blobs = blobs - (OLD.state = 'done'),
    bytes = bytes - CASE WHEN OLD.state = 'done' THEN (SELECT size FROM blobs WHERE id = OLD.blob_id) ELSE 0 END,
    pending = pending - (OLD.state = 'pending'), failed = failed - (OLD.state = 'failed')
  WHERE channel_id = OLD.channel_id;
  INSERT INTO channel_usage (channel_id, blobs, bytes, pending, failed)
    SELECT NEW.channel_id, NEW.state = 'done', CASE WHEN NEW.state = 'done' THEN b.size ELSE 0 END, NEW.state = 'pending', NEW.state = 'failed'
    FROM blobs b WHERE b.id = NEW.blob_id
    ON CONFLICT (channel_id) DO UPDATE SET blobs = blobs + excluded.blobs, bytes = bytes + excluded.bytes,
      pending = pending + excluded.pending, failed = failed + excluded.failed;
END;

-- The replica rows of a blob go (and leave the rollup) while the blob's size can still be
-- read: a foreign-key cascade would run after the blob row is gone.
CREATE TRIGGER usage_blob_delete BEFORE DELETE ON blobs BEGIN
  DELETE FROM blob_channels WHERE blob_id = OLD.id;
END;

-- Sizes are written once at upload; should one ever be corrected, the rollups follow.
CREATE TRIGGER usage_blob_resize AFTER UPDATE OF size ON blobs WHEN OLD.size != NEW.size BEGIN
  UPDATE user_usage SET
    bytes = bytes + (NEW.size - OLD.size) * (SELECT COUNT(*) FROM images WHERE blob_id = NEW.id AND user_id = user_usage.user_id),
    traffic = traffic + (NEW.size - OLD.size) * (SELECT COALESCE(SUM(access_count), 0) FROM images WHERE blob_id = NEW.id AND user_id = user_usage.user_id)
  WHERE user_id IN (SELECT user_id FROM images WHERE blob_id = NEW.id);
  UPDATE channel_usage SET bytes = bytes + (NEW.size - OLD.size)
  WHERE channel_id IN (SELECT channel_id FROM blob_channels WHERE blob_id = NEW.id AND state = 'done');
END;

CREATE TRIGGER usage_channel_delete AFTER DELETE ON channels BEGIN
  DELETE FROM channel_usage WHERE channel_id = OLD.id;
END;

-- Dashboard top images (everyone's and one user's) read the first rows of these.
CREATE INDEX images_top ON images(access_count DESC, created_at DESC);
CREATE INDEX images_user_top ON images(user_id, access_count DESC, created_at DESC);
-- The cleanup list and the cold sweep each touch only their side of pending_cleanup,
-- ordered by the age the cold rule judges (an exempt image is never flagged).
CREATE INDEX images_cleanup_list ON images(COALESCE(last_public_access_at, created_at))
  WHERE pending_cleanup = 1 AND cleanup_exempt = 0;
CREATE INDEX images_cold_candidates ON images(COALESCE(last_public_access_at, created_at))
  WHERE pending_cleanup = 0 AND cleanup_exempt = 0;
-- Upload undo and crash recovery look blobs up by storage key.
CREATE INDEX blobs_storage_key ON blobs(storage_key);
-- The review list and the dashboard count only pending pairs.
CREATE INDEX dedup_pending ON dedup_candidates(id) WHERE state = 'pending';

-- File-name search: a trigram FTS5 index (external content, so names are stored once).
CREATE VIRTUAL TABLE images_fts USING fts5(file_name, content = 'images', content_rowid = 'rowid', tokenize = 'trigram');
INSERT INTO images_fts (images_fts) VALUES ('rebuild');
CREATE TRIGGER images_fts_insert AFTER INSERT ON images BEGIN
  INSERT INTO images_fts (rowid, file_name) VALUES (NEW.rowid, NEW.file_name);
END;
CREATE TRIGGER images_fts_delete AFTER DELETE ON images BEGIN
  INSERT INTO images_fts (images_fts, rowid, file_name) VALUES ('delete', OLD.rowid, OLD.file_name);
END;
CREATE TRIGGER images_fts_update AFTER UPDATE OF file_name ON images BEGIN
  INSERT INTO images_fts (images_fts, rowid, file_name) VALUES ('delete', OLD.rowid, OLD.file_name);
  INSERT INTO images_fts (rowid, file_name) VALUES (NEW.rowid, NEW.file_name);
END;

-- Near-duplicate index (multi-index hashing): the 64-bit perceptual hash split into 7
-- chunks; two hashes within Hamming distance 6 agree exactly on at least one chunk, so a
-- new blob is compared only with the blobs sharing one of its 7 (chunk, value) keys.
CREATE TABLE phash_index (
  chunk   INTEGER NOT NULL,
  value   INTEGER NOT NULL,
  blob_id INTEGER NOT NULL REFERENCES blobs(id) ON DELETE CASCADE,
  hash    INTEGER NOT NULL,               -- the whole 64-bit hash (signed), so a probe needs no join
  PRIMARY KEY (chunk, value, blob_id)
) WITHOUT ROWID;
CREATE INDEX phash_index_blob ON phash_index(blob_id);
-- The scan's waiting list: blobs not hashed yet, and blobs waiting for their physical delete.
CREATE INDEX blobs_unhashed ON blobs(id) WHERE phash = '';
CREATE INDEX blobs_pending_delete ON blobs(id) WHERE pending_delete = 1;
-- The index starts empty: the scan re-reads every hashed blob once, in small slices, to fill it.
DELETE FROM meta WHERE key = 'dedup_scan_watermark';
