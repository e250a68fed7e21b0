-- Objects written to a channel before the transaction that records them commits.
-- A crash between the two leaves an intent behind; startup deletes such objects
-- unless a blob row now owns them, so storage never keeps orphans of a crash.
CREATE TABLE upload_intents (
  id          INTEGER PRIMARY KEY AUTOINCREMENT,
  channel_id  INTEGER NOT NULL,
  storage_key TEXT NOT NULL,
  created_at  TEXT NOT NULL
);
