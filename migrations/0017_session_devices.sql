-- Audit 15 LOW-11: a user could end only the session in front of them (logout) or every session at once
-- (a password change). A cookie left on a borrowed machine, or taken, could not be ended on its own.
--
-- Where each session logged in from, so the console can list a user's sessions and end any of them:
-- the client address as Kura saw it (KURA_TRUSTED_PROXIES applied) and the browser's User-Agent, cut
-- to 256 characters. Sessions from before this column show empty values until they end (at most 30 days).
ALTER TABLE sessions ADD COLUMN client TEXT NOT NULL DEFAULT '';
ALTER TABLE sessions ADD COLUMN user_agent TEXT NOT NULL DEFAULT '';
