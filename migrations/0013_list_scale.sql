-- List pages at a million images (issue 10, audit 10 HIGH-4 and MED-4).

-- The Lsky Pro list orders one user's images by size (`order=utmost|least`). The size lives on
-- the blob, which an index on images cannot reach, so every page sorted all of the user's images
-- joined to blobs. Each reference now carries its blob's size, kept in step by triggers (an upload
-- inserts the row, a merge re-points blob_id, a corrected size changes the blob), and one index
-- walks a user's images in size order.
ALTER TABLE images ADD COLUMN blob_size INTEGER NOT NULL DEFAULT 0;
UPDATE images SET blob_size = (SELECT size FROM blobs WHERE id = images.blob_id);
CREATE INDEX images_user_size ON images(user_id, blob_size);

-- The upload's own INSERT sets blob_size (repos/references.ts), so this trigger's UPDATE, a
-- second write of the new row and its size index entry, runs only for rows inserted without it.
CREATE TRIGGER images_blob_size_insert AFTER INSERT ON images WHEN NEW.blob_size = 0 BEGIN
  UPDATE images SET blob_size = (SELECT size FROM blobs WHERE id = NEW.blob_id) WHERE rowid = NEW.rowid;
END;
CREATE TRIGGER images_blob_size_move AFTER UPDATE OF blob_id ON images WHEN OLD.blob_id != NEW.blob_id BEGIN
  UPDATE images SET blob_size = (SELECT size FROM blobs WHERE id = NEW.blob_id) WHERE rowid = NEW.rowid;
END;
CREATE TRIGGER images_blob_size_resize AFTER UPDATE OF size ON blobs WHEN OLD.size != NEW.size BEGIN
  UPDATE images SET blob_size = NEW.size WHERE blob_id = NEW.id;
END;

-- The token filter (`/api/admin/images?token_id=`) in the list's order: (token_id, created_at,
-- rowid). The old (token_id) index served it only without an owner; with one, the planner walked
-- the owner's whole images_user index looking for the token's few rows.
DROP INDEX images_token;
CREATE INDEX images_token ON images(token_id, created_at) WHERE token_id IS NOT NULL;

-- A keyword in one user's list counts the user's own names: with the names in an index of their
-- own, a count over 141k of them is index-only (~20 ms in steps) instead of a table read per row (~80 ms).
CREATE INDEX images_user_name ON images(user_id, file_name);
