-- The audit log at a million rows (issue 10, audit 10 MED-5). The list filters by exact actor,
-- action or target and pages newest first (`ORDER BY created_at DESC, id DESC`, openapi.yaml
-- "按时间倒序"); without these indexes each filter scanned the table (120-145 ms a page). Each
-- index ends in created_at (and, implicitly, the rowid id), so a filter with or without a
-- since/until window walks one index range already in the list's order, and its COUNT reads
-- only that range. The unfiltered list keeps using audit_created (0001).
CREATE INDEX audit_action ON audit(action, created_at);
CREATE INDEX audit_actor ON audit(actor, created_at);
CREATE INDEX audit_target ON audit(target, created_at);

-- Similar-image pairs (audit 10 HIGH-2, MED-6): a scan now keeps, per blob at its turn, its 20
-- nearest pairs (dedup-rescan.ts PAIRS_PER_BLOB). A burst of near-identical uploads stored every
-- pair before (~350k for 1,300 copies of one photo), a review list nobody works through and whose
-- pages and counts slowed with it. Pending pairs beyond the 20 nearest of their later blob
-- (blob_b; ties: the lower blob_a) are dropped once, here; decided pairs stay.
DELETE FROM dedup_candidates WHERE id IN (
  SELECT id FROM (
    SELECT id, row_number() OVER (PARTITION BY blob_b ORDER BY distance, blob_a) AS k
    FROM dedup_candidates WHERE state = 'pending'
  ) WHERE k > 20
);
