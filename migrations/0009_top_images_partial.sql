-- The dashboards' top images: only images that were ever accessed are kept in these two
-- indexes. Every upload used to write both: a row with access_count 0 and the newest
-- created_at lands at the left edge of the 0-group of a descending index, where SQLite
-- splits pages instead of appending, and the two cost about half of the image row's insert
-- (bench/README.md, "eleventh session"). Images nobody accessed yet are
-- listed from images_created / images_user instead, when fewer than a page were accessed.
DROP INDEX images_top;
DROP INDEX images_user_top;
CREATE INDEX images_top ON images(access_count DESC, created_at DESC) WHERE access_count > 0;
CREATE INDEX images_user_top ON images(user_id, access_count DESC, created_at DESC) WHERE access_count > 0;
