-- tickq schema 1 (SQLite): the jobs table and the attempts history.
-- Times are ISO-8601 UTC text with microseconds ('2026-01-02T03:04:05.000006+00:00'),
-- one fixed format so text order is time order.
CREATE TABLE tickq_jobs (
    id               INTEGER PRIMARY KEY AUTOINCREMENT,
    type             TEXT    NOT NULL,
    queue            TEXT    NOT NULL DEFAULT 'default',
    payload          TEXT    NOT NULL DEFAULT '{}' CHECK (json_valid(payload)),
    status           TEXT    NOT NULL DEFAULT 'pending'
                     CHECK (status IN ('pending', 'running', 'done', 'failed', 'cancelled')),
    priority         INTEGER NOT NULL DEFAULT 0,
    attempts         INTEGER NOT NULL DEFAULT 0,
    max_attempts     INTEGER NOT NULL DEFAULT 4 CHECK (max_attempts >= 1),
    run_after        TEXT    NOT NULL,
    last_error       TEXT,
    unique_key       TEXT,
    unique_scope     TEXT    CHECK (unique_scope IN ('active', 'all')),
    lease_owner      TEXT,
    lease_expires_at TEXT,
    meta             TEXT,
    created_at       TEXT    NOT NULL,
    updated_at       TEXT    NOT NULL,
    attempted_at     TEXT,
    finished_at      TEXT
);

-- Claiming: only pending rows are indexed, so millions of done rows cost nothing.
CREATE INDEX tickq_jobs_claim ON tickq_jobs (priority DESC, run_after, id)
    WHERE status = 'pending';
-- Rescuing jobs whose worker stopped renewing its lease.
CREATE INDEX tickq_jobs_lease ON tickq_jobs (lease_expires_at) WHERE status = 'running';
-- Unique jobs, enforced by the database: one active job per key...
CREATE UNIQUE INDEX tickq_jobs_unique_active ON tickq_jobs (unique_key)
    WHERE unique_key IS NOT NULL AND status IN ('pending', 'running');
-- ...and, for unique_scope = 'all', one job per key for as long as it stays in the table.
CREATE UNIQUE INDEX tickq_jobs_unique_all ON tickq_jobs (unique_key)
    WHERE unique_scope = 'all';
-- Pruning and listing finished jobs by age.
CREATE INDEX tickq_jobs_finished ON tickq_jobs (finished_at) WHERE finished_at IS NOT NULL;

CREATE TABLE tickq_attempts (
    job_id      INTEGER NOT NULL,
    attempt     INTEGER NOT NULL,
    started_at  TEXT,
    finished_at TEXT    NOT NULL,
    outcome     TEXT    NOT NULL,
    error       TEXT,
    PRIMARY KEY (job_id, attempt)
);
