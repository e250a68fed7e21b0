-- The audit log at a million rows (issue 10, audit 10 MED-5). The list filters by exact actor,
-- action or target and pages newest first (`ORDER BY created_at DESC, id DESC`, openapi.yaml
-- "按时间倒序"); without these indexes each filter scanned the table (120-145 ms a page). Each
-- index ends in created_at (and, implicitly, the rowid id), so a filter with or without a
-- since/until window walks one index range already in the list's order, and its COUNT reads
-- only that range. The unfiltered list keeps using audit_created (0001).
CREATE INDEX audit_action ON audit(action, created_at);
CREATE INDEX audit_actor ON audit(actor, created_at);
CREATE INDEX audit_target ON audit(target, created_at);
