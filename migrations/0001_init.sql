-- Core schema. Timestamps are UTC text 'YYYY-MM-DD HH:MM:SS' (sortable, as the API shows them).

CREATE TABLE meta (
  key   TEXT PRIMARY KEY,
  value TEXT NOT NULL
);

CREATE TABLE settings (
  key   TEXT PRIMARY KEY,
  value TEXT NOT NULL            -- JSON; secret values are sealed with the master key
);

CREATE TABLE users (
  id                   TEXT PRIMARY KEY,
  name                 TEXT NOT NULL UNIQUE,
  role                 TEXT NOT NULL CHECK (role IN ('admin', 'user')),
  password_hash        TEXT NOT NULL,
  must_change_password INTEGER NOT NULL DEFAULT 0,
  quota_bytes          INTEGER,             -- NULL = unlimited
  default_ttl_hours    INTEGER,             -- NULL = follow global, 0 = permanent
  disabled             INTEGER NOT NULL DEFAULT 0,
  created_at           TEXT NOT NULL
);

CREATE TABLE sessions (
  id_hash    TEXT PRIMARY KEY,              -- sha256 of the cookie value; the value itself is never stored
  user_id    TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
  created_at TEXT NOT NULL,
  expires_at TEXT NOT NULL
);
CREATE INDEX sessions_user ON sessions(user_id);

CREATE TABLE tokens (
  id           INTEGER PRIMARY KEY AUTOINCREMENT,
  user_id      TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
  name         TEXT NOT NULL,
  prefix       TEXT NOT NULL UNIQUE,
  secret_hash  TEXT NOT NULL,
  scopes       TEXT NOT NULL DEFAULT 'upload',
  expires_at   TEXT,
  last_used_at TEXT,
  revoked_at   TEXT,
  created_at   TEXT NOT NULL
);
-- A name is unique among a user's tokens that have not been replaced by rotation.
CREATE UNIQUE INDEX tokens_user_name ON tokens(user_id, name);

CREATE TABLE channels (
  id                INTEGER PRIMARY KEY AUTOINCREMENT,
  name              TEXT NOT NULL UNIQUE,
  driver            TEXT NOT NULL,
  template          TEXT NOT NULL DEFAULT '',
  config_sealed     TEXT NOT NULL,          -- JSON {config, inputs} sealed with the master key
  priority          INTEGER NOT NULL DEFAULT 0,
  encrypted         INTEGER NOT NULL DEFAULT 0,
  allow_direct_link INTEGER NOT NULL DEFAULT 0,
  healthy           INTEGER NOT NULL DEFAULT 0,
  last_checked_at   TEXT NOT NULL DEFAULT '',
  last_error        TEXT NOT NULL DEFAULT '',
  deleting          INTEGER NOT NULL DEFAULT 0,
  bound_at          TEXT NOT NULL,          -- binding time: objects older than this are not ours to judge
  created_at        TEXT NOT NULL
);

CREATE TABLE blobs (
  id             INTEGER PRIMARY KEY AUTOINCREMENT,
  sha256         TEXT NOT NULL UNIQUE,
  phash          TEXT NOT NULL DEFAULT '',
  storage_key    TEXT NOT NULL,
  mime           TEXT NOT NULL,
  size           INTEGER NOT NULL,
  width          INTEGER NOT NULL,
  height         INTEGER NOT NULL,
  ref_count      INTEGER NOT NULL DEFAULT 0,
  pending_delete INTEGER NOT NULL DEFAULT 0,
  delete_after   TEXT,
  created_at     TEXT NOT NULL
);

CREATE TABLE blob_channels (
  blob_id    INTEGER NOT NULL REFERENCES blobs(id) ON DELETE CASCADE,
  channel_id INTEGER NOT NULL REFERENCES channels(id) ON DELETE CASCADE,
  state      TEXT NOT NULL,                 -- pending | done | failed | deleting
  attempts   INTEGER NOT NULL DEFAULT 0,
  last_error TEXT NOT NULL DEFAULT '',
  updated_at TEXT NOT NULL,
  PRIMARY KEY (blob_id, channel_id)
);
CREATE INDEX blob_channels_channel ON blob_channels(channel_id, state);

CREATE TABLE images (
  id                    TEXT PRIMARY KEY,   -- 10-character short id
  blob_id               INTEGER NOT NULL REFERENCES blobs(id),
  user_id               TEXT NOT NULL REFERENCES users(id),
  token_id              INTEGER REFERENCES tokens(id) ON DELETE SET NULL,
  file_name             TEXT NOT NULL,
  object_key            TEXT,
  expire_at             TEXT,
  ttl_seconds           INTEGER,
  last_public_access_at TEXT,
  access_count          INTEGER NOT NULL DEFAULT 0,
  pending_cleanup       INTEGER NOT NULL DEFAULT 0,
  cleanup_exempt        INTEGER NOT NULL DEFAULT 0,
  created_at            TEXT NOT NULL
);
CREATE INDEX images_user ON images(user_id, created_at);
CREATE INDEX images_blob ON images(blob_id);
CREATE INDEX images_expire ON images(expire_at) WHERE expire_at IS NOT NULL;
CREATE UNIQUE INDEX images_object_key ON images(user_id, object_key) WHERE object_key IS NOT NULL;

CREATE TABLE variants (
  blob_id    INTEGER NOT NULL REFERENCES blobs(id) ON DELETE CASCADE,
  width      INTEGER NOT NULL,              -- 0 = not resized
  format     TEXT NOT NULL,
  size       INTEGER NOT NULL,
  created_at TEXT NOT NULL,
  PRIMARY KEY (blob_id, width, format)
);

CREATE TABLE referer_rules (
  id         INTEGER PRIMARY KEY AUTOINCREMENT,
  pattern    TEXT NOT NULL UNIQUE,
  created_at TEXT NOT NULL
);

CREATE TABLE audit (
  id         INTEGER PRIMARY KEY AUTOINCREMENT,
  actor      TEXT NOT NULL,
  actor_name TEXT NOT NULL,
  action     TEXT NOT NULL,
  target     TEXT NOT NULL DEFAULT '',
  detail     TEXT NOT NULL DEFAULT '',
  created_at TEXT NOT NULL
);
CREATE INDEX audit_created ON audit(created_at);

CREATE TABLE alerts (
  id          INTEGER PRIMARY KEY AUTOINCREMENT,
  kind        TEXT NOT NULL,
  target      TEXT NOT NULL DEFAULT '',
  message     TEXT NOT NULL,
  opened_at   TEXT NOT NULL,
  resolved_at TEXT NOT NULL DEFAULT '',
  open_delivered     INTEGER NOT NULL DEFAULT 0,
  resolved_delivered INTEGER NOT NULL DEFAULT 0
);
CREATE UNIQUE INDEX alerts_open ON alerts(kind, target) WHERE resolved_at = '';

CREATE TABLE idempotency_keys (
  user_id    TEXT NOT NULL,
  key        TEXT NOT NULL,
  image_id   TEXT NOT NULL,
  created_at TEXT NOT NULL,
  PRIMARY KEY (user_id, key)
);

CREATE TABLE dedup_candidates (
  id         INTEGER PRIMARY KEY AUTOINCREMENT,
  blob_a     INTEGER NOT NULL REFERENCES blobs(id) ON DELETE CASCADE,
  blob_b     INTEGER NOT NULL REFERENCES blobs(id) ON DELETE CASCADE,
  distance   INTEGER NOT NULL,
  state      TEXT NOT NULL DEFAULT 'pending', -- pending | merged | dismissed
  created_at TEXT NOT NULL,
  UNIQUE (blob_a, blob_b)
);
