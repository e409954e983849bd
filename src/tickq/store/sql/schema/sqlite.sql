-- tickq's schema of record (SQLite): what a fully migrated empty database holds, written
-- out whole. Read it to know the tables; build them with q.migrate() (or `tickq migrate`),
-- which applies the numbered scripts in ../migrations/sqlite/ and records each in
-- tickq_migrations. tests/test_schema_of_record.py checks that the two agree, so a new
-- migration comes with its change here.
-- Times are ISO-8601 UTC text with microseconds ('2026-01-02T03:04:05.000006+00:00'), one
-- fixed format so text order is time order, unless a column says "epoch seconds".

-- The jobs: one row per job, from enqueue until it is pruned.
CREATE TABLE tickq_jobs (
    id               INTEGER PRIMARY KEY AUTOINCREMENT,  -- never reused, even after a prune
    type             TEXT    NOT NULL,  -- the job function's registered name
    queue            TEXT    NOT NULL DEFAULT 'default',
    payload          TEXT    NOT NULL DEFAULT '{}' CHECK (json_valid(payload)),  -- as enqueued
    status           TEXT    NOT NULL DEFAULT 'pending'
                     CHECK (status IN ('pending', 'running', 'done', 'failed', 'cancelled')),
    priority         INTEGER NOT NULL DEFAULT 0,  -- higher is claimed first
    attempts         INTEGER NOT NULL DEFAULT 0,  -- attempts counted, the running one too
    max_attempts     INTEGER NOT NULL DEFAULT 4 CHECK (max_attempts >= 1),
    run_after        TEXT    NOT NULL,  -- not claimed before this time
    last_error       TEXT,  -- the error of the latest attempt that did not succeed
    -- unique_key: at most one job per key, while active (unique_scope 'active') or for as
    -- long as the job stays in the table ('all'); NULL: not unique.
    unique_key       TEXT,
    unique_scope     TEXT    CHECK (unique_scope IN ('active', 'all')),
    lease_owner      TEXT,  -- the process running the job (NULL unless running)
    lease_expires_at TEXT,  -- when a rescue may take the job back unless its owner renews
    meta             TEXT,  -- JSON object: what tickq tells the job (e.g. a schedule's slot)
    created_at       TEXT    NOT NULL,
    updated_at       TEXT    NOT NULL,
    attempted_at     TEXT,  -- when the latest attempt was claimed
    finished_at      TEXT,  -- when it became done, failed or cancelled (NULL until then)
    duration         REAL,  -- seconds the successful attempt's function ran, as measured
    result           TEXT,  -- JSON: what the job function returned, kept when it succeeded
    -- ahead: 0 = not claimed, or claimed and its start confirmed; 1 = claimed (at once or
    -- ahead of free slots), start not yet confirmed: a rescue refunds the attempt (1 means
    -- something only while running); 2 = refunded once: never claimed ahead or refunded
    -- again, so a job that kills its worker each time still runs out of attempts.
    ahead            INTEGER NOT NULL DEFAULT 0,
    cancel_requested_at TEXT,  -- when q.cancel() asked the running attempt to stop
    snoozes          INTEGER NOT NULL DEFAULT 0,  -- times it raised Snooze (not attempts)
    snoozed_since    TEXT,     -- its first snooze since enqueue or a manual retry
    -- lease_clock: '<monotonic clock> <lease_expires_at>' the lease was measured with
    -- (e.g. 'boot:<id> ...'); lease_mono: when the lease runs out on that clock. A rescuer
    -- on the same clock judges by lease_mono, any other by lease_expires_at.
    lease_clock      TEXT,
    lease_mono       REAL,
    -- concurrency_key: the key its type's limits apply to (@q.job(concurrency_key=...)),
    -- computed at enqueue; NULL for a job of a type without one.
    concurrency_key  TEXT
);

-- Claiming: only pending rows are indexed, so millions of done rows cost nothing.
CREATE INDEX tickq_jobs_claim ON tickq_jobs (priority DESC, run_after, id)
    WHERE status = 'pending';
-- A tick's backlog read: the earliest due time and the due count, future jobs unread.
CREATE INDEX tickq_jobs_due ON tickq_jobs (run_after) WHERE status = 'pending';
-- Rescuing jobs whose worker stopped renewing its lease.
CREATE INDEX tickq_jobs_lease ON tickq_jobs (lease_expires_at) WHERE status = 'running';
-- Unique jobs, enforced by the database: one active job per key...
CREATE UNIQUE INDEX tickq_jobs_unique_active ON tickq_jobs (unique_key)
    WHERE unique_key IS NOT NULL AND status IN ('pending', 'running');
-- ...and, for unique_scope = 'all', one job per key for as long as it stays in the table.
CREATE UNIQUE INDEX tickq_jobs_unique_all ON tickq_jobs (unique_key)
    WHERE unique_scope = 'all';
-- Pruning, listing finished jobs by age, and the dashboard's jobs-done-per-hour chart.
CREATE INDEX tickq_jobs_finished ON tickq_jobs (finished_at, status) WHERE finished_at IS NOT NULL;
-- Failed and cancelled jobs by queue and type, counted from the index alone.
CREATE INDEX tickq_jobs_stopped ON tickq_jobs (status, queue, type, id)
    WHERE status IN ('failed', 'cancelled');
-- Jobs of one type, newest first (keyset pages), and the recent alert deliveries.
CREATE INDEX tickq_jobs_type ON tickq_jobs (type, id);
-- Jobs of one queue, newest first (the dashboard's queue filter, keyset pages).
CREATE INDEX tickq_jobs_queue ON tickq_jobs (queue, id);
-- Pending jobs by queue and type, counted from the index alone (stats(), the dashboard).
CREATE INDEX tickq_jobs_pending ON tickq_jobs (queue, type, status) WHERE status = 'pending';
-- Search by unique key, whatever the job's status or scope.
CREATE INDEX tickq_jobs_unique_key ON tickq_jobs (unique_key) WHERE unique_key IS NOT NULL;
-- A keyed type's pending jobs by key, in claim order within each key: the claim steps
-- from one key to the next through it (min over "key > previous") and takes each head.
-- Both keyed indexes hold keyed jobs only: a job without a key pays nothing for them.
CREATE INDEX tickq_jobs_keyed ON tickq_jobs (type, concurrency_key, priority DESC, run_after, id)
    WHERE status = 'pending' AND concurrency_key IS NOT NULL;
-- A keyed type's running jobs by key and lease: the claim counts one key's live ones.
CREATE INDEX tickq_jobs_keyed_running ON tickq_jobs (type, concurrency_key, lease_expires_at)
    WHERE status = 'running' AND concurrency_key IS NOT NULL;

-- The history: one row per finished attempt that did not succeed (a success is read
-- from the job row), and per run not counted as an attempt. Pruned with its job.
CREATE TABLE tickq_attempts (
    job_id      INTEGER NOT NULL,
    -- attempt: its number; when refunded or released, minus the number it gave back.
    attempt     INTEGER NOT NULL,
    -- snooze: 0 for an attempt; n for the job's n-th snooze (numbered as the attempt that
    -- follows it); negative for a release (-1, -2, ... for releases of one number).
    snooze      INTEGER NOT NULL DEFAULT 0,
    started_at  TEXT,              -- when the attempt was claimed
    finished_at TEXT    NOT NULL,
    -- outcome: error, lease_expired, cancelled, snoozed, refunded or released.
    outcome     TEXT    NOT NULL,
    error       TEXT,
    duration    REAL,              -- seconds its function ran, as measured
    PRIMARY KEY (job_id, attempt, snooze)
);
-- Alerts count the failed attempts of one type within a window.
CREATE INDEX tickq_attempts_finished ON tickq_attempts (finished_at);

-- Schedule cursors: every slot at or before handled_until has been enqueued (or skipped
-- as missed). A tick moves it only from the value it read, in the transaction that
-- inserts the slot's job, so a slot is enqueued once ever, even after its job is pruned.
CREATE TABLE tickq_schedules (
    name          TEXT PRIMARY KEY,
    handled_until TEXT NOT NULL,
    last_slot     TEXT,  -- the latest slot enqueued
    updated_at    TEXT NOT NULL
);

-- One row (id 1): when the last tick began and how many there were, for /health.
CREATE TABLE tickq_ticks (
    id           INTEGER PRIMARY KEY CHECK (id = 1),
    last_tick_at TEXT    NOT NULL,
    ticks        INTEGER NOT NULL DEFAULT 1
);

-- Processed totals and the duration histogram: every finished attempt (a done job counts
-- as one, outcome 'done'), pruned ones too, added by the triggers below in the
-- transaction that writes it, so reading them costs the same at any table size and they
-- never go down.
CREATE TABLE tickq_totals (
    queue    TEXT    NOT NULL,
    type     TEXT    NOT NULL,
    outcome  TEXT    NOT NULL,  -- done, or an attempts outcome
    le       TEXT    NOT NULL,  -- the histogram bucket's upper bound ('0.005' ... '+Inf')
    attempts INTEGER NOT NULL DEFAULT 0,  -- how many
    seconds  REAL    NOT NULL DEFAULT 0,  -- their durations' sum
    PRIMARY KEY (queue, type, outcome, le)
);

-- Done jobs deleted (pruned or by hand), by queue and type: the jobs done now are the
-- 'done' totals less these (stats() reads no done row).
CREATE TABLE tickq_pruned (
    queue TEXT    NOT NULL,
    type  TEXT    NOT NULL,
    jobs  INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (queue, type)
);

-- An attempt row.
CREATE TRIGGER tickq_count_attempts AFTER INSERT ON tickq_attempts
BEGIN
    INSERT INTO tickq_totals (queue, type, outcome, le, attempts, seconds)
    SELECT j.queue, j.type, NEW.outcome, (CASE WHEN seconds IS NULL THEN '0.005' WHEN seconds <= 0.005 THEN '0.005' WHEN seconds <= 0.01 THEN '0.01' WHEN seconds <= 0.025 THEN '0.025' WHEN seconds <= 0.05 THEN '0.05'
        WHEN seconds <= 0.1 THEN '0.1' WHEN seconds <= 0.25 THEN '0.25' WHEN seconds <= 0.5 THEN '0.5' WHEN seconds <= 1 THEN '1.0'
        WHEN seconds <= 2.5 THEN '2.5' WHEN seconds <= 5 THEN '5.0' WHEN seconds <= 10 THEN '10.0' WHEN seconds <= 30 THEN '30.0'
        WHEN seconds <= 60 THEN '60.0' WHEN seconds <= 120 THEN '120.0' WHEN seconds <= 300 THEN '300.0' WHEN seconds <= 600 THEN '600.0'
        WHEN seconds <= 1800 THEN '1800.0' WHEN seconds <= 3600 THEN '3600.0' ELSE '+Inf' END),
           1, COALESCE(seconds, 0)
    FROM tickq_jobs j, (SELECT COALESCE(NEW.duration,
        (julianday(NEW.finished_at) - julianday(NEW.started_at)) * 86400.0) AS seconds)
    WHERE j.id = NEW.job_id
    ON CONFLICT (queue, type, outcome, le) DO UPDATE
    SET attempts = tickq_totals.attempts + 1, seconds = tickq_totals.seconds + excluded.seconds;
END;

-- A job that became done (a job never leaves done but to be deleted).
CREATE TRIGGER tickq_count_done AFTER UPDATE OF status ON tickq_jobs
WHEN NEW.status = 'done' AND OLD.status <> 'done'
BEGIN
    INSERT INTO tickq_totals (queue, type, outcome, le, attempts, seconds)
    SELECT NEW.queue, NEW.type, 'done', (CASE WHEN seconds IS NULL THEN '0.005' WHEN seconds <= 0.005 THEN '0.005' WHEN seconds <= 0.01 THEN '0.01' WHEN seconds <= 0.025 THEN '0.025' WHEN seconds <= 0.05 THEN '0.05'
        WHEN seconds <= 0.1 THEN '0.1' WHEN seconds <= 0.25 THEN '0.25' WHEN seconds <= 0.5 THEN '0.5' WHEN seconds <= 1 THEN '1.0'
        WHEN seconds <= 2.5 THEN '2.5' WHEN seconds <= 5 THEN '5.0' WHEN seconds <= 10 THEN '10.0' WHEN seconds <= 30 THEN '30.0'
        WHEN seconds <= 60 THEN '60.0' WHEN seconds <= 120 THEN '120.0' WHEN seconds <= 300 THEN '300.0' WHEN seconds <= 600 THEN '600.0'
        WHEN seconds <= 1800 THEN '1800.0' WHEN seconds <= 3600 THEN '3600.0' ELSE '+Inf' END),
           1, COALESCE(seconds, 0)
    FROM (SELECT COALESCE(NEW.duration,
        (julianday(NEW.finished_at) - julianday(NEW.attempted_at)) * 86400.0) AS seconds)
    WHERE true
    ON CONFLICT (queue, type, outcome, le) DO UPDATE
    SET attempts = tickq_totals.attempts + 1, seconds = tickq_totals.seconds + excluded.seconds;
END;

-- A done job deleted (pruned, or deleted by hand).
CREATE TRIGGER tickq_count_pruned AFTER DELETE ON tickq_jobs
WHEN OLD.status = 'done'
BEGIN
    INSERT INTO tickq_pruned (queue, type, jobs) VALUES (OLD.queue, OLD.type, 1)
    ON CONFLICT (queue, type) DO UPDATE SET jobs = tickq_pruned.jobs + 1;
END;

-- Queue controls, read by every claim, so every process obeys them (docs/controls.md).
-- Paused queues: their jobs are not claimed until resumed (enqueueing still works).
CREATE TABLE tickq_paused (
    queue     TEXT PRIMARY KEY,
    paused_at TEXT NOT NULL
);

-- Limits of job types, written by the first claim of a process that registers the type:
-- at most `concurrency` running at once, at most `rate` starts within any `per` seconds
-- (NULL: no such limit). A type listed here is claimed only through its limits, and never
-- ahead unless keyed with no rate limit (then within each key's room).
CREATE TABLE tickq_limits (
    type        TEXT PRIMARY KEY,
    concurrency INTEGER CHECK (concurrency IS NULL OR concurrency >= 1),
    rate        INTEGER CHECK (rate IS NULL OR rate >= 1),
    per         REAL    CHECK (per IS NULL OR per > 0),
    updated_at  TEXT    NOT NULL,
    keyed       INTEGER NOT NULL DEFAULT 0  -- 1: both hold per concurrency key
);

-- Starts of rate-limited types, kept for one window: the rate check counts them (a keyed
-- type's per key).
CREATE TABLE tickq_starts (
    type TEXT NOT NULL,
    at   REAL NOT NULL,  -- epoch seconds
    key  TEXT            -- the start's concurrency key (a keyed type's), else NULL
);
CREATE INDEX tickq_starts_type ON tickq_starts (type, at);
CREATE INDEX tickq_starts_key ON tickq_starts (type, key, at) WHERE key IS NOT NULL;

-- Where the last claim of a keyed type stopped among its keys (NULL: at the first): the
-- next one goes on from there, so keys take turns whatever their names or backlogs.
CREATE TABLE tickq_key_cursors (
    type TEXT PRIMARY KEY,
    key  TEXT
);

-- The dashboard's logins (docs/security.md); times are epoch seconds from its clock.
-- The install's random signing key (one row), made by the first dashboard that needs it.
CREATE TABLE tickq_dashboard_keys (
    name       TEXT PRIMARY KEY,
    value      TEXT NOT NULL,
    created_at REAL NOT NULL
);

-- One row per logged-in browser. Logout deletes the row; so does expiry.
CREATE TABLE tickq_dashboard_sessions (
    id           TEXT PRIMARY KEY,  -- SHA-256 of the cookie's token (never stored itself)
    password_tag TEXT NOT NULL,     -- ties it to the password it logged in with
    created_at   REAL NOT NULL,
    expires_at   REAL NOT NULL
);
CREATE INDEX tickq_dashboard_sessions_expires ON tickq_dashboard_sessions (expires_at);

-- Login attempts being checked or failed, kept for the limiter's window.
CREATE TABLE tickq_dashboard_logins (
    id     TEXT PRIMARY KEY,
    client TEXT NOT NULL,  -- who tried (the limiter counts per client)
    at     REAL NOT NULL
);
CREATE INDEX tickq_dashboard_logins_client ON tickq_dashboard_logins (client, at);
CREATE INDEX tickq_dashboard_logins_at ON tickq_dashboard_logins (at);

-- What each live process's wall clock says (SQLite only: on Postgres the database's clock
-- decides). A schedule slot comes due when most live clocks say so.
CREATE TABLE tickq_clocks (
    owner   TEXT PRIMARY KEY,  -- the process
    domain  TEXT NOT NULL,     -- the shared monotonic clock it read ('boot:<id>')
    offset  REAL NOT NULL,     -- its wall seconds since 1970 minus that clock's seconds
    seen    REAL NOT NULL,     -- that clock's reading when it last said so
    seen_at TEXT NOT NULL
);

-- Signed scheduler calls already accepted (Upstash QStash's JWT ids), kept until their
-- token expires, so a captured call replayed is refused.
CREATE TABLE tickq_tokens_seen (
    jti        TEXT PRIMARY KEY,
    expires_at REAL NOT NULL  -- epoch seconds: the token's exp
);
CREATE INDEX tickq_tokens_seen_expiry ON tickq_tokens_seen (expires_at);

-- Durable workflows (docs/workflows.md). A run is its driver job (type 'tickq.workflow',
-- same id) replaying the workflow function; its steps are recorded below, each step job's
-- end recorded and the run woken by triggers, in the transaction that ends the job.
CREATE TABLE tickq_workflow_runs (
    id          INTEGER PRIMARY KEY,  -- the id of its driver job
    workflow    TEXT    NOT NULL,     -- the workflow's registered name
    status      TEXT    NOT NULL DEFAULT 'running'
                CHECK (status IN ('running', 'waiting', 'done', 'failed', 'cancelled')),
    payload     TEXT    NOT NULL DEFAULT '{}' CHECK (json_valid(payload)),  -- as started
    result      TEXT,     -- JSON: what the workflow function returned
    error       TEXT,     -- why it failed or was cancelled
    wakes       INTEGER NOT NULL DEFAULT 0,  -- counts step ends and events delivered
    created_at  TEXT    NOT NULL,
    updated_at  TEXT    NOT NULL,
    finished_at TEXT
);
CREATE INDEX tickq_workflow_runs_status ON tickq_workflow_runs (status, id);
CREATE INDEX tickq_workflow_runs_workflow ON tickq_workflow_runs (workflow, id);

-- One row per recorded call of a run, numbered in the order the code made them.
CREATE TABLE tickq_workflow_steps (
    run_id      INTEGER NOT NULL,
    seq         INTEGER NOT NULL,  -- 0, 1, 2... in execution order
    kind        TEXT    NOT NULL CHECK (kind IN ('job', 'sleep', 'event', 'value')),
    name        TEXT    NOT NULL,  -- the job type, 'sleep', the event's name, or the value's
    -- pending (a job not finished), waiting (a sleep or wait not over), done, failed,
    -- cancelled (a job), timed_out (a wait whose timeout came first).
    status      TEXT    NOT NULL
                CHECK (status IN ('pending', 'waiting', 'done', 'failed', 'cancelled',
                                  'timed_out')),
    job_id      INTEGER,  -- the step's job (kind 'job')
    event_key   TEXT,     -- the key waited for (kind 'event')
    event_id    INTEGER,  -- the event received
    wake_at     TEXT,     -- when a sleep ends or a wait times out
    attempts    INTEGER NOT NULL DEFAULT 0,  -- the job's attempts, once it ended
    result      TEXT,     -- JSON: the job's result, the event's data, the value recorded
    error       TEXT,     -- the job's last error, when it failed
    created_at  TEXT    NOT NULL,
    finished_at TEXT,
    PRIMARY KEY (run_id, seq)
);
CREATE INDEX tickq_workflow_steps_job ON tickq_workflow_steps (job_id) WHERE job_id IS NOT NULL;
CREATE INDEX tickq_workflow_steps_waiting ON tickq_workflow_steps (name, event_key)
    WHERE status = 'waiting' AND kind = 'event';

-- Events sent with q.send_event, kept until expires_at for runs that reach wait_for later.
CREATE TABLE tickq_workflow_events (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    name       TEXT    NOT NULL,
    key        TEXT    NOT NULL,
    data       TEXT,  -- JSON
    created_at TEXT    NOT NULL,
    expires_at TEXT    NOT NULL
);
CREATE INDEX tickq_workflow_events_key ON tickq_workflow_events (name, key, id);
CREATE INDEX tickq_workflow_events_expiry ON tickq_workflow_events (expires_at);

-- A step job ended (by its worker, a rescue or a cancel): its result is recorded once, and
-- its run woken (due now, unless due sooner; a driver replaying right then keeps the due
-- time it gets here, see tickq_workflow_steps and the suspended transition).
-- (NEW.meta IS NOT NULL first: most jobs have none, and json_extract costs every finish µs.)
CREATE TRIGGER tickq_workflow_step_ended AFTER UPDATE OF status ON tickq_jobs
WHEN NEW.meta IS NOT NULL AND NEW.status IN ('done', 'failed', 'cancelled')
     AND OLD.status IN ('pending', 'running')
     AND json_extract(NEW.meta, '$.workflow_run') IS NOT NULL
BEGIN
    UPDATE tickq_workflow_steps
    SET status = NEW.status, result = NEW.result, error = NEW.last_error,
        attempts = NEW.attempts, finished_at = NEW.updated_at
    WHERE run_id = json_extract(NEW.meta, '$.workflow_run') AND job_id = NEW.id
      AND status = 'pending';
    UPDATE tickq_jobs SET run_after = MIN(run_after, NEW.updated_at)
    WHERE id = json_extract(NEW.meta, '$.workflow_run') AND status IN ('pending', 'running');
    UPDATE tickq_workflow_runs SET wakes = wakes + 1
    WHERE id = json_extract(NEW.meta, '$.workflow_run');
END;

-- A driver job ended, or was retried by hand: its run's status follows.
CREATE TRIGGER tickq_workflow_run_moved AFTER UPDATE OF status ON tickq_jobs
WHEN NEW.type = 'tickq.workflow'
     AND ((OLD.status IN ('pending', 'running') AND NEW.status IN ('done', 'failed', 'cancelled'))
          OR (OLD.status IN ('done', 'failed', 'cancelled') AND NEW.status = 'pending'))
BEGIN
    UPDATE tickq_workflow_runs
    SET status = CASE WHEN NEW.status = 'pending' THEN 'running' ELSE NEW.status END,
        result = CASE WHEN NEW.status = 'done' THEN NEW.result END,
        error = CASE WHEN NEW.status IN ('failed', 'cancelled') THEN NEW.last_error END,
        finished_at = CASE WHEN NEW.status = 'pending' THEN NULL ELSE NEW.updated_at END,
        updated_at = NEW.updated_at
    WHERE id = NEW.id;
END;

-- Retention (schema 20): when the next pruning pass is due across every process; a
-- process takes the pass with one fenced upsert (due_at <= now), so only one prunes per interval.
-- owner: who took the last pass; last_pruned_at: when a pass last ended; pruned: the jobs
-- that pass (and the batches before it, while behind) deleted; behind: 1 when it found
-- more than a batch (due again at once, the next tick or worker step goes on).
CREATE TABLE tickq_retention (
    id             INTEGER PRIMARY KEY CHECK (id = 1),
    due_at         TEXT    NOT NULL,
    owner          TEXT,
    last_pruned_at TEXT,
    pruned         INTEGER NOT NULL DEFAULT 0,
    behind         INTEGER NOT NULL DEFAULT 0
);

-- The migrations applied (q.migrate() creates this table itself, before the first one).
CREATE TABLE IF NOT EXISTS tickq_migrations (
    version    INTEGER PRIMARY KEY,
    name       TEXT NOT NULL,  -- the script's file name without .sql
    applied_at TEXT NOT NULL
);
