-- Pairs by their second blob (issue 10). `UNIQUE (blob_a, blob_b)` finds a blob's pairs as
-- blob_a only, so everything that looks a blob up as blob_b read the whole table: the cascade
-- that removes a deleted blob's pairs (every physical blob delete, with foreign keys on), the
-- dismissal of the other pairs of a blob merged away, and the pairs a kept blob already has.
CREATE INDEX dedup_candidates_blob_b ON dedup_candidates(blob_b);
