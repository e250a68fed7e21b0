-- Blobs are no longer indexed by storage key. Every key embeds the blob's sha256
-- (storageKeyFor: img/ab/cd/<sha256>-<generation>.<ext>), so the two lookups by key (upload
-- undo, crash recovery) go through the sha256 index instead. The index cost every upload a
-- random leaf page (one more WAL frame per commit) and ~90 MB at 800,000 blobs.
DROP INDEX blobs_storage_key;
