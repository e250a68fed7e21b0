-- Lsky Pro compatibility (audit LOW-13).
--
-- Which surface issued a token: '' the console or the admin API, 'lsky' POST /api/v1/tokens.
-- DELETE /api/v1/tokens (Lsky's "clear tokens") revokes the caller's 'lsky' tokens and the calling
-- token, never a token made in the console for S3, ShareX or other tools.
ALTER TABLE tokens ADD COLUMN issued_via TEXT NOT NULL DEFAULT '';
-- Issued before this column: POST /api/v1/tokens named them lsky-<YYYYMMDDHHMMSS>-<6 hex digits>.
UPDATE tokens SET issued_via = 'lsky'
  WHERE name GLOB 'lsky-[0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9]-[0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f]';

-- A blob's SHA-1 (the Lsky image list's `sha1`), '' until known: recorded when an upload computes it
-- (Lsky, Chevereto and keyed uploads compute MD5 and SHA-1 of the stored bytes), never computed for a
-- listing. Adding a column with a constant default rewrites no row.
ALTER TABLE blobs ADD COLUMN sha1 TEXT NOT NULL DEFAULT '';
