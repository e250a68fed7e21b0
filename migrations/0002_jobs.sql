-- Durable job queue (src/jobs/). Unlike the core schema, every time column here
-- is INTEGER unix milliseconds: leases and backoff need sub-second precision and
-- the poller compares them with plain integer arithmetic. Nothing in the public
-- API shows these values, so the TEXT display format is not needed.

CREATE TABLE jobs (
  id           INTEGER PRIMARY KEY AUTOINCREMENT,
  kind         TEXT NOT NULL,
  payload      TEXT NOT NULL DEFAULT '{}',           -- JSON
  state        TEXT NOT NULL CHECK (state IN ('available', 'scheduled', 'running', 'retryable', 'completed', 'discarded')),
  attempts     INTEGER NOT NULL DEFAULT 0,           -- claims so far; also the fencing token of the current run
  max_attempts INTEGER NOT NULL CHECK (max_attempts >= 1),
  run_at       INTEGER NOT NULL,                     -- not before this time
  locked_until INTEGER,                              -- lease end while running; NULL otherwise
  last_error   TEXT,
  unique_key   TEXT,                                 -- dedup among unfinished jobs of the same kind
  created_at   INTEGER NOT NULL,
  updated_at   INTEGER NOT NULL,
  finished_at  INTEGER                               -- set on completed / discarded
);

-- The poller: due jobs of one kind in run_at order.
CREATE INDEX jobs_due ON jobs(kind, state, run_at);
-- Lease expiry sweep and the queue gauges.
CREATE INDEX jobs_state_lease ON jobs(state, locked_until);
-- At most one unfinished job per (kind, unique_key); finished ones may repeat.
CREATE UNIQUE INDEX jobs_unique_pending ON jobs(kind, unique_key)
  WHERE unique_key IS NOT NULL AND state IN ('available', 'scheduled', 'running', 'retryable');
-- Retention pruning of finished jobs.
CREATE INDEX jobs_finished ON jobs(state, finished_at)
  WHERE state IN ('completed', 'discarded');
