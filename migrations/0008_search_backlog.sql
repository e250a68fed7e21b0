-- File names reach the search index in batches after the upload, not inside its transaction.
-- Indexing one name wrote a new FTS5 segment (six pages of a lone upload's ~34) plus its
-- docsize and idx rows at every commit; a batch of hundreds writes about as many pages as one.
-- The backlog holds the images not indexed yet; search reads them directly (a LIKE over the
-- backlog only), so a name is findable the moment its upload answers.
CREATE TABLE images_fts_backlog (image_rowid INTEGER PRIMARY KEY);

DROP TRIGGER images_fts_insert;
CREATE TRIGGER images_fts_insert AFTER INSERT ON images BEGIN
  INSERT INTO images_fts_backlog (image_rowid) VALUES (NEW.rowid);
END;

-- An image still in the backlog was never indexed: deleting it from FTS5 (external content)
-- would corrupt the index, so only indexed names are removed there.
DROP TRIGGER images_fts_delete;
CREATE TRIGGER images_fts_delete AFTER DELETE ON images BEGIN
  INSERT INTO images_fts (images_fts, rowid, file_name)
    SELECT 'delete', OLD.rowid, OLD.file_name
    WHERE NOT EXISTS (SELECT 1 FROM images_fts_backlog WHERE image_rowid = OLD.rowid);
  DELETE FROM images_fts_backlog WHERE image_rowid = OLD.rowid;
END;

-- A renamed image in the backlog is indexed later under its new name.
DROP TRIGGER images_fts_update;
CREATE TRIGGER images_fts_update AFTER UPDATE OF file_name ON images
  WHEN NOT EXISTS (SELECT 1 FROM images_fts_backlog WHERE image_rowid = OLD.rowid) BEGIN
  INSERT INTO images_fts (images_fts, rowid, file_name) VALUES ('delete', OLD.rowid, OLD.file_name);
  INSERT INTO images_fts (rowid, file_name) VALUES (NEW.rowid, NEW.file_name);
END;
