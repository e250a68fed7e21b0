-- The review lists at a million images (issue 10). The cleanup list's `total` and the
-- dashboard's `pending_cleanup` read a counter instead of counting ~1M index entries, and the
-- images list's "exempt only" filter reads a partial index instead of scanning every image.

-- One row: images on the cleanup list (flagged and not exempt) and images exempt from cleanup.
-- Triggers keep it in the same transaction as every change to either flag (sweep, access
-- flush, object-key supersede, PATCH, delete). New images carry neither flag, so uploads
-- pass the WHEN clauses without writing anything.
CREATE TABLE cleanup_counts (
  id     INTEGER PRIMARY KEY CHECK (id = 1),
  listed INTEGER NOT NULL,
  exempt INTEGER NOT NULL
);
INSERT INTO cleanup_counts (id, listed, exempt) VALUES (1,
  (SELECT COUNT(*) FROM images WHERE pending_cleanup = 1 AND cleanup_exempt = 0),
  (SELECT COUNT(*) FROM images WHERE cleanup_exempt = 1));

CREATE TRIGGER cleanup_counts_insert AFTER INSERT ON images
  WHEN NEW.pending_cleanup = 1 OR NEW.cleanup_exempt = 1 BEGIN
  UPDATE cleanup_counts SET listed = listed + (NEW.pending_cleanup = 1 AND NEW.cleanup_exempt = 0),
    exempt = exempt + (NEW.cleanup_exempt = 1);
END;

CREATE TRIGGER cleanup_counts_delete AFTER DELETE ON images
  WHEN OLD.pending_cleanup = 1 OR OLD.cleanup_exempt = 1 BEGIN
  UPDATE cleanup_counts SET listed = listed - (OLD.pending_cleanup = 1 AND OLD.cleanup_exempt = 0),
    exempt = exempt - (OLD.cleanup_exempt = 1);
END;

CREATE TRIGGER cleanup_counts_update AFTER UPDATE OF pending_cleanup, cleanup_exempt ON images
  WHEN OLD.pending_cleanup IS NOT NEW.pending_cleanup OR OLD.cleanup_exempt IS NOT NEW.cleanup_exempt BEGIN
  UPDATE cleanup_counts SET
    listed = listed + (NEW.pending_cleanup = 1 AND NEW.cleanup_exempt = 0) - (OLD.pending_cleanup = 1 AND OLD.cleanup_exempt = 0),
    exempt = exempt + (NEW.cleanup_exempt = 1) - (OLD.cleanup_exempt = 1);
END;

-- "Exempt only" in the images list, for everyone (newest first) and for one owner. Only
-- exempt images are in these, so uploads never write them.
CREATE INDEX images_exempt ON images(created_at) WHERE cleanup_exempt = 1;
CREATE INDEX images_user_exempt ON images(user_id, created_at) WHERE cleanup_exempt = 1;

-- The dedup review list pages by (distance, id) through pending pairs only.
CREATE INDEX dedup_pending_order ON dedup_candidates(distance, id) WHERE state = 'pending';
