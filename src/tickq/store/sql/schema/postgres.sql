-- tickq's schema of record (PostgreSQL): what a fully migrated empty schema holds, written
-- out whole, functions as the last migration that replaced them left them. Read it to
-- know the tables; build them with q.migrate() (or `tickq migrate`), which applies the
-- numbered scripts in ../migrations/postgres/ and records each in tickq_migrations.
-- tests/test_schema_of_record.py checks that the two agree, so a new migration comes with
-- its change here. Objects go in the connection's search_path schema.
-- "Due" and leases are judged by the database's clock (now()), never a client's.

-- The jobs: one row per job, from enqueue until it is pruned.
CREATE TABLE tickq_jobs (
    id               BIGINT      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    type             TEXT        NOT NULL,  -- the job function's registered name
    queue            TEXT        NOT NULL DEFAULT 'default',
    -- payload: `json`, not jsonb: the text exactly as enqueued (jsonb would rewrite -0.0,
    -- 1e+16 and key order, and refuse "\u0000").
    payload          JSON        NOT NULL DEFAULT '{}',
    status           TEXT        NOT NULL DEFAULT 'pending'
                     CHECK (status IN ('pending', 'running', 'done', 'failed', 'cancelled')),
    priority         INTEGER     NOT NULL DEFAULT 0,  -- higher is claimed first
    attempts         INTEGER     NOT NULL DEFAULT 0,  -- attempts counted, the running one too
    max_attempts     INTEGER     NOT NULL DEFAULT 4 CHECK (max_attempts >= 1),
    run_after        TIMESTAMPTZ NOT NULL DEFAULT now(),  -- not claimed before this time
    last_error       TEXT,  -- the error of the latest attempt that did not succeed
    -- unique_key: at most one job per key, while active (unique_scope 'active') or for as
    -- long as the job stays in the table ('all'); NULL: not unique.
    unique_key       TEXT,
    unique_scope     TEXT        CHECK (unique_scope IN ('active', 'all')),
    lease_owner      TEXT,         -- the process running the job (NULL unless running)
    lease_expires_at TIMESTAMPTZ,  -- when a rescue may take the job back unless renewed
    meta             JSONB,        -- what tickq tells the job (e.g. a schedule's slot)
    created_at       TIMESTAMPTZ NOT NULL DEFAULT now(),
    updated_at       TIMESTAMPTZ NOT NULL DEFAULT now(),
    attempted_at     TIMESTAMPTZ,  -- when the latest attempt was claimed
    finished_at      TIMESTAMPTZ,  -- when it became done, failed or cancelled
    duration         DOUBLE PRECISION,  -- seconds the successful attempt's function ran
    result           JSON,         -- what the job function returned, kept when it succeeded
    -- ahead: 0 = not claimed, or claimed and its start confirmed; 1 = claimed (at once or
    -- ahead of free slots), start not yet confirmed: a rescue refunds the attempt (1 means
    -- something only while running); 2 = refunded once: never claimed ahead or refunded
    -- again, so a job that kills its worker each time still runs out of attempts.
    ahead            SMALLINT    NOT NULL DEFAULT 0,
    cancel_requested_at TIMESTAMPTZ,  -- when q.cancel() asked the running attempt to stop
    snoozes          INTEGER     NOT NULL DEFAULT 0,  -- times it raised Snooze (not attempts)
    snoozed_since    TIMESTAMPTZ,  -- its first snooze since enqueue or a manual retry
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
    job_id      BIGINT      NOT NULL,
    -- attempt: its number; when refunded or released, minus the number it gave back.
    attempt     INTEGER     NOT NULL,
    started_at  TIMESTAMPTZ,           -- when the attempt was claimed
    finished_at TIMESTAMPTZ NOT NULL,
    -- outcome: error, lease_expired, cancelled, snoozed, refunded or released.
    outcome     TEXT        NOT NULL,
    error       TEXT,
    duration    DOUBLE PRECISION,      -- seconds its function ran, as measured
    -- snooze: 0 for an attempt; n for the job's n-th snooze (numbered as the attempt that
    -- follows it); negative for a release (-1, -2, ... for releases of one number).
    snooze      INTEGER     NOT NULL DEFAULT 0,
    PRIMARY KEY (job_id, attempt, snooze)
);
-- Alerts count the failed attempts of one type within a window.
CREATE INDEX tickq_attempts_finished ON tickq_attempts (finished_at);

-- Schedule cursors: every slot at or before handled_until has been enqueued (or skipped
-- as missed). A tick moves it only from the value it read, in the statement that inserts
-- the slot's job, so a slot is enqueued once ever, even after its job is pruned.
CREATE TABLE tickq_schedules (
    name          TEXT        PRIMARY KEY,
    handled_until TIMESTAMPTZ NOT NULL,
    last_slot     TIMESTAMPTZ,  -- the latest slot enqueued
    updated_at    TIMESTAMPTZ NOT NULL
);

-- One row (id 1): when the last tick began and how many there were, for /health.
CREATE TABLE tickq_ticks (
    id           INTEGER     PRIMARY KEY CHECK (id = 1),
    last_tick_at TIMESTAMPTZ NOT NULL,
    ticks        BIGINT      NOT NULL DEFAULT 1
);

-- Processed totals and the duration histogram: every finished attempt (a done job counts
-- as one, outcome 'done'), pruned ones too, added by the triggers below in the
-- transaction that writes it, so reading them costs the same at any table size and they
-- never go down. Split in 8 shards by backend (pg_backend_pid() % 8), so workers finishing
-- jobs of one type at once seldom wait on one row's lock; readers sum the shards.
CREATE TABLE tickq_totals (
    queue    TEXT             NOT NULL,
    type     TEXT             NOT NULL,
    outcome  TEXT             NOT NULL,  -- done, or an attempts outcome
    le       TEXT             NOT NULL,  -- the histogram bucket's upper bound ('0.005' ... '+Inf')
    attempts BIGINT           NOT NULL DEFAULT 0,  -- how many
    seconds  DOUBLE PRECISION NOT NULL DEFAULT 0,  -- their durations' sum
    shard    SMALLINT         NOT NULL DEFAULT 0,
    PRIMARY KEY (queue, type, outcome, le, shard)
);

-- Done jobs deleted (pruned or by hand), by queue and type, in shards as above: the jobs
-- done now are the 'done' totals less these (stats() reads no done row).
CREATE TABLE tickq_pruned (
    queue TEXT     NOT NULL,
    type  TEXT     NOT NULL,
    shard SMALLINT NOT NULL DEFAULT 0,
    jobs  BIGINT   NOT NULL DEFAULT 0,
    PRIMARY KEY (queue, type, shard)
);

-- A duration's histogram bucket label (the one tickq.store.queries.DURATION_BUCKETS gives).
CREATE FUNCTION tickq_duration_bucket(seconds double precision) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN (CASE WHEN seconds IS NULL THEN '0.005' WHEN seconds <= 0.005 THEN '0.005' WHEN seconds <= 0.01 THEN '0.01' WHEN seconds <= 0.025 THEN '0.025' WHEN seconds <= 0.05 THEN '0.05'
    WHEN seconds <= 0.1 THEN '0.1' WHEN seconds <= 0.25 THEN '0.25' WHEN seconds <= 0.5 THEN '0.5' WHEN seconds <= 1 THEN '1.0'
    WHEN seconds <= 2.5 THEN '2.5' WHEN seconds <= 5 THEN '5.0' WHEN seconds <= 10 THEN '10.0' WHEN seconds <= 30 THEN '30.0'
    WHEN seconds <= 60 THEN '60.0' WHEN seconds <= 120 THEN '120.0' WHEN seconds <= 300 THEN '300.0' WHEN seconds <= 600 THEN '600.0'
    WHEN seconds <= 1800 THEN '1800.0' WHEN seconds <= 3600 THEN '3600.0' ELSE '+Inf' END);

-- An attempt row (row by row: a finish that succeeds inserts none and pays nothing here).
CREATE FUNCTION tickq_count_attempts() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    took double precision := COALESCE(NEW.duration,
        CAST(EXTRACT(EPOCH FROM NEW.finished_at - NEW.started_at) AS float8));
BEGIN
    INSERT INTO tickq_totals AS t (queue, type, outcome, le, shard, attempts, seconds)
    SELECT j.queue, j.type, NEW.outcome, tickq_duration_bucket(took), pg_backend_pid() % 8,
           1, COALESCE(took, 0)
    FROM tickq_jobs j WHERE j.id = NEW.job_id
    ON CONFLICT (queue, type, outcome, le, shard) DO UPDATE
    SET attempts = t.attempts + 1, seconds = t.seconds + excluded.seconds;
    RETURN NULL;
END
$$;
CREATE TRIGGER tickq_count_attempts AFTER INSERT ON tickq_attempts
FOR EACH ROW EXECUTE FUNCTION tickq_count_attempts();

-- Jobs that became done (a job never leaves done but to be deleted), counted per
-- statement (schema 27): a worker's finish of 100 jobs adds one row per queue, type and
-- duration bucket, where a row trigger ran 100 functions and 100 upserts of one row.
CREATE FUNCTION tickq_count_done() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO tickq_totals AS t (queue, type, outcome, le, shard, attempts, seconds)
    SELECT n.queue, n.type, 'done', tickq_duration_bucket(d.took), pg_backend_pid() % 8,
           count(*), COALESCE(sum(d.took), 0)
    FROM tickq_jobs_after n JOIN tickq_jobs_before o ON o.id = n.id,
         LATERAL (SELECT COALESCE(n.duration, CAST(EXTRACT(EPOCH FROM n.finished_at
                                                    - n.attempted_at) AS float8)) AS took) d
    WHERE n.status = 'done' AND o.status <> 'done'
    GROUP BY 1, 2, 4
    ON CONFLICT (queue, type, outcome, le, shard) DO UPDATE
    SET attempts = t.attempts + excluded.attempts, seconds = t.seconds + excluded.seconds;
    RETURN NULL;
END
$$;
CREATE TRIGGER tickq_count_done AFTER UPDATE ON tickq_jobs
REFERENCING OLD TABLE AS tickq_jobs_before NEW TABLE AS tickq_jobs_after
FOR EACH STATEMENT EXECUTE FUNCTION tickq_count_done();

-- Done jobs deleted (pruned, or deleted by hand), counted per statement.
CREATE FUNCTION tickq_count_pruned() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO tickq_pruned AS p (queue, type, shard, jobs)
    SELECT queue, type, pg_backend_pid() % 8, count(*) FROM tickq_jobs_deleted
    WHERE status = 'done' GROUP BY 1, 2
    ON CONFLICT (queue, type, shard) DO UPDATE SET jobs = p.jobs + excluded.jobs;
    RETURN NULL;
END
$$;
CREATE TRIGGER tickq_count_pruned AFTER DELETE ON tickq_jobs
REFERENCING OLD TABLE AS tickq_jobs_deleted
FOR EACH STATEMENT EXECUTE FUNCTION tickq_count_pruned();

-- Queue controls, checked inside the claim (tickq_due), so every process on every machine
-- obeys them (docs/controls.md).
-- Paused queues: their jobs are not claimed until resumed (enqueueing still works).
CREATE TABLE tickq_paused (
    queue     TEXT PRIMARY KEY,
    paused_at TIMESTAMPTZ NOT NULL DEFAULT now()
);

-- Limits of job types, written by the first claim of a process that registers the type:
-- at most `concurrency` running at once, at most `rate` starts within any `per` seconds
-- (NULL: no such limit); keyed: both hold per concurrency key, not for the whole type.
-- A type listed here is claimed only through its limits (ahead of a worker's free slots
-- too, within the room they leave: see tickq_due_ahead).
CREATE TABLE tickq_limits (
    type        TEXT PRIMARY KEY,
    concurrency INTEGER CHECK (concurrency IS NULL OR concurrency >= 1),
    rate        INTEGER CHECK (rate IS NULL OR rate >= 1),
    per         DOUBLE PRECISION CHECK (per IS NULL OR per > 0),
    updated_at  TIMESTAMPTZ NOT NULL DEFAULT now(),
    keyed       BOOLEAN NOT NULL DEFAULT false
);

-- Starts of rate-limited types, kept for one window: the rate check counts them (a keyed
-- type's per key).
CREATE TABLE tickq_starts (
    type TEXT        NOT NULL,
    at   TIMESTAMPTZ NOT NULL,
    key  TEXT         -- the start's concurrency key (a keyed type's), else NULL
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
    created_at DOUBLE PRECISION NOT NULL
);

-- One row per logged-in browser. Logout deletes the row; so does expiry.
CREATE TABLE tickq_dashboard_sessions (
    id           TEXT PRIMARY KEY,  -- SHA-256 of the cookie's token (never stored itself)
    password_tag TEXT NOT NULL,     -- ties it to the password it logged in with
    created_at   DOUBLE PRECISION NOT NULL,
    expires_at   DOUBLE PRECISION NOT NULL
);
CREATE INDEX tickq_dashboard_sessions_expires ON tickq_dashboard_sessions (expires_at);

-- Login attempts being checked or failed, kept for the limiter's window.
CREATE TABLE tickq_dashboard_logins (
    id     TEXT PRIMARY KEY,
    client TEXT NOT NULL,  -- who tried (the limiter counts per client)
    at     DOUBLE PRECISION NOT NULL
);
CREATE INDEX tickq_dashboard_logins_client ON tickq_dashboard_logins (client, at);
CREATE INDEX tickq_dashboard_logins_at ON tickq_dashboard_logins (at);

-- Signed scheduler calls already accepted (Upstash QStash's JWT ids), kept until their
-- token expires, so a captured call replayed is refused.
CREATE TABLE tickq_tokens_seen (
    jti        TEXT PRIMARY KEY,
    expires_at DOUBLE PRECISION NOT NULL  -- epoch seconds: the token's exp
);
CREATE INDEX tickq_tokens_seen_expiry ON tickq_tokens_seen (expires_at);

-- Durable workflows (docs/workflows.md). A run is its driver job (type 'tickq.workflow',
-- same id) replaying the workflow function; its steps are recorded below, each step job's
-- end recorded and the run woken by triggers, in the transaction that ends the job.
CREATE TABLE tickq_workflow_runs (
    id          BIGINT      PRIMARY KEY,  -- the id of its driver job
    workflow    TEXT        NOT NULL,     -- the workflow's registered name
    status      TEXT        NOT NULL DEFAULT 'running'
                CHECK (status IN ('running', 'waiting', 'done', 'failed', 'cancelled')),
    payload     JSON        NOT NULL DEFAULT '{}',  -- as started
    result      JSON,         -- what the workflow function returned
    error       TEXT,         -- why it failed or was cancelled
    wakes       BIGINT      NOT NULL DEFAULT 0,  -- counts step ends and events delivered
    created_at  TIMESTAMPTZ NOT NULL,
    updated_at  TIMESTAMPTZ NOT NULL,
    finished_at TIMESTAMPTZ
);
CREATE INDEX tickq_workflow_runs_status ON tickq_workflow_runs (status, id);
CREATE INDEX tickq_workflow_runs_workflow ON tickq_workflow_runs (workflow, id);

-- One row per recorded call of a run, numbered in the order the code made them.
CREATE TABLE tickq_workflow_steps (
    run_id      BIGINT      NOT NULL,
    seq         INTEGER     NOT NULL,  -- 0, 1, 2... in execution order
    kind        TEXT        NOT NULL CHECK (kind IN ('job', 'sleep', 'event', 'value')),
    name        TEXT        NOT NULL,  -- the job type, 'sleep', the event's or value's name
    -- pending (a job not finished), waiting (a sleep or wait not over), done, failed,
    -- cancelled (a job), timed_out (a wait whose timeout came first).
    status      TEXT        NOT NULL
                CHECK (status IN ('pending', 'waiting', 'done', 'failed', 'cancelled',
                                  'timed_out')),
    job_id      BIGINT,       -- the step's job (kind 'job')
    event_key   TEXT,         -- the key waited for (kind 'event')
    event_id    BIGINT,       -- the event received
    wake_at     TIMESTAMPTZ,  -- when a sleep ends or a wait times out
    attempts    INTEGER     NOT NULL DEFAULT 0,  -- the job's attempts, once it ended
    result      JSON,         -- the job's result, the event's data, the value recorded
    error       TEXT,         -- the job's last error, when it failed
    created_at  TIMESTAMPTZ NOT NULL,
    finished_at TIMESTAMPTZ,
    PRIMARY KEY (run_id, seq)
);
CREATE INDEX tickq_workflow_steps_job ON tickq_workflow_steps (job_id) WHERE job_id IS NOT NULL;
CREATE INDEX tickq_workflow_steps_waiting ON tickq_workflow_steps (name, event_key)
    WHERE status = 'waiting' AND kind = 'event';

-- Events sent with q.send_event, kept until expires_at for runs that reach wait_for later.
CREATE TABLE tickq_workflow_events (
    id         BIGINT      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name       TEXT        NOT NULL,
    key        TEXT        NOT NULL,
    data       JSON,
    created_at TIMESTAMPTZ NOT NULL,
    expires_at TIMESTAMPTZ NOT NULL
);
CREATE INDEX tickq_workflow_events_key ON tickq_workflow_events (name, key, id);
CREATE INDEX tickq_workflow_events_expiry ON tickq_workflow_events (expires_at);

-- A step job ended (by its worker, a rescue or a cancel): its result is recorded once, and
-- its run woken (due now, unless due sooner; a driver replaying right then keeps the due
-- time it gets here, see the suspended transition), listening workers notified at commit.
CREATE FUNCTION tickq_workflow_step_ended() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    run bigint := CAST(NEW.meta ->> 'workflow_run' AS bigint);
    woken text;
BEGIN
    UPDATE tickq_workflow_steps
    SET status = NEW.status, result = NEW.result, error = NEW.last_error,
        attempts = NEW.attempts, finished_at = NEW.updated_at
    WHERE run_id = run AND job_id = NEW.id AND status = 'pending';
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    -- The driver's row before the run's, as everywhere: a driver's own finish holds its
    -- row, then its trigger takes the run's. No test of run_after in the WHERE: it must
    -- wait for a replay writing the driver's due time right now, then move it sooner.
    UPDATE tickq_jobs SET run_after = LEAST(run_after, NEW.updated_at)
    WHERE id = run AND status IN ('pending', 'running')
    RETURNING queue INTO woken;
    IF woken IS NOT NULL THEN
        PERFORM pg_notify('tickq_' || CAST(CAST('tickq_jobs' AS regclass) AS oid), woken);
    END IF;
    UPDATE tickq_workflow_runs SET wakes = wakes + 1 WHERE id = run;
    RETURN NULL;
END
$$;
CREATE TRIGGER tickq_workflow_step_ended AFTER UPDATE OF status ON tickq_jobs
FOR EACH ROW
WHEN (OLD.status IN ('pending', 'running') AND NEW.status IN ('done', 'failed', 'cancelled')
      AND NEW.meta ? 'workflow_run')
EXECUTE FUNCTION tickq_workflow_step_ended();

-- A driver job ended, or was retried by hand: its run's status follows.
CREATE FUNCTION tickq_workflow_run_moved() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    UPDATE tickq_workflow_runs
    SET status = CASE WHEN NEW.status = 'pending' THEN 'running' ELSE NEW.status END,
        result = CASE WHEN NEW.status = 'done' THEN NEW.result END,
        error = CASE WHEN NEW.status IN ('failed', 'cancelled') THEN NEW.last_error END,
        finished_at = CASE WHEN NEW.status = 'pending' THEN NULL ELSE NEW.updated_at END,
        updated_at = NEW.updated_at
    WHERE id = NEW.id;
    RETURN NULL;
END
$$;
CREATE TRIGGER tickq_workflow_run_moved AFTER UPDATE OF status ON tickq_jobs
FOR EACH ROW
WHEN (NEW.type = 'tickq.workflow'
      AND ((OLD.status IN ('pending', 'running') AND NEW.status IN ('done', 'failed', 'cancelled'))
           OR (OLD.status IN ('done', 'failed', 'cancelled') AND NEW.status = 'pending')))
EXECUTE FUNCTION tickq_workflow_run_moved();

-- Retention (schema 20): when the next pruning pass is due across every process; a
-- process takes the pass with one fenced upsert (due_at <= now), so only one prunes per interval.
-- owner: who took the last pass; last_pruned_at: when a pass last ended; pruned: the jobs
-- that pass (and the batches before it, while behind) deleted; behind: true when it found
-- more than a batch (due again at once, the next tick or worker step goes on).
CREATE TABLE tickq_retention (
    id             integer     PRIMARY KEY CHECK (id = 1),
    due_at         timestamptz NOT NULL,
    owner          text,
    last_pruned_at timestamptz,
    pruned         bigint      NOT NULL DEFAULT 0,
    behind         boolean     NOT NULL DEFAULT false
);

-- The migrations applied (q.migrate() creates this table itself, before the first one).
CREATE TABLE IF NOT EXISTS tickq_migrations (
    version    INTEGER PRIMARY KEY,
    name       TEXT NOT NULL,  -- the script's file name without .sql
    applied_at TIMESTAMPTZ NOT NULL DEFAULT now()
);

-- The claims' functions. Each walks the claim index in claim order, locking the rows it
-- returns (FOR UPDATE SKIP LOCKED), with sorts and bitmap scans off: before a table's first
-- ANALYZE the planner could otherwise sort every due pending row to find the first few.
-- The claim that calls one moves every id it returns to running.

-- The due jobs of one keyed type, as many as each key's limits allow now, locked, with
-- the rate limit's starts written per key. Keys take turns: the walk starts after the
-- key where the last claim stopped (tickq_key_cursors), goes on to the last key, then
-- from the first, and stops when it has `lim` jobs, is back where it started, or has
-- looked at 64 keys more than `lim` (the next claim goes on from there): a key at its
-- limit, however long its backlog, costs one probe. The caller holds the type's
-- advisory lock, so the counts hold until it commits. for_ahead: for a claim ahead (jobs
-- once refunded are skipped); wait: each start is written that many seconds after `ts`
-- (a claim ahead's: the latest its job may start, see tickq_due_ahead).
CREATE FUNCTION tickq_due_keyed(typ text, most integer, rate integer, per double precision,
                                lim integer, queues text[], ts timestamptz,
                                for_ahead boolean, wait double precision DEFAULT 0)
RETURNS SETOF bigint
LANGUAGE plpgsql VOLATILE
SET enable_sort = off
SET enable_bitmapscan = off
AS $$
DECLARE
    start text := (SELECT c.key FROM tickq_key_cursors c WHERE c.type = typ);
    k text := start;
    last text := start;
    wrapped boolean := false;
    looks integer := 64 + lim;
    room integer;
    ids bigint[];
BEGIN
    LOOP
        EXIT WHEN lim <= 0 OR looks <= 0;
        -- Two statements, not "k IS NULL OR key > k": a cached generic plan of that scans
        -- every pending job of the type for the minimum.
        IF k IS NULL THEN
            k := (SELECT min(j.concurrency_key) FROM tickq_jobs j
                  WHERE j.status = 'pending' AND j.type = typ AND j.concurrency_key IS NOT NULL);
        ELSE
            k := (SELECT min(j.concurrency_key) FROM tickq_jobs j
                  WHERE j.status = 'pending' AND j.type = typ AND j.concurrency_key > k);
        END IF;
        IF k IS NULL THEN
            EXIT WHEN wrapped OR start IS NULL;
            wrapped := true;
            CONTINUE;
        END IF;
        EXIT WHEN wrapped AND k > start;
        looks := looks - 1;
        last := k;
        room := lim;
        IF most IS NOT NULL THEN
            room := LEAST(room, most - (
                SELECT count(*) FROM tickq_jobs r
                WHERE r.status = 'running' AND r.type = typ AND r.concurrency_key = k
                  AND r.lease_expires_at > ts));
        END IF;
        IF rate IS NOT NULL THEN
            room := LEAST(room, rate - (
                SELECT count(*) FROM tickq_starts s
                WHERE s.type = typ AND s.key = k AND s.at > ts - make_interval(secs => per)));
        END IF;
        CONTINUE WHEN room <= 0;
        ids := ARRAY(
            SELECT id FROM tickq_jobs j
            WHERE j.status = 'pending' AND j.type = typ AND j.concurrency_key = k
              AND j.run_after <= ts AND (queues IS NULL OR j.queue = ANY(queues))
              AND (NOT for_ahead OR j.ahead < 2)
              AND NOT EXISTS (SELECT 1 FROM tickq_paused p WHERE p.queue = j.queue)
            ORDER BY j.priority DESC, j.run_after, j.id
            LIMIT room
            FOR UPDATE SKIP LOCKED);
        CONTINUE WHEN cardinality(ids) = 0;
        IF rate IS NOT NULL THEN
            DELETE FROM tickq_starts s
            WHERE s.type = typ AND s.at <= ts - make_interval(secs => per);
            INSERT INTO tickq_starts (type, key, at)
            SELECT typ, k, ts + make_interval(secs => wait) FROM unnest(ids);
        END IF;
        lim := lim - cardinality(ids);
        RETURN QUERY SELECT unnest(ids);
    END LOOP;
    IF last IS DISTINCT FROM start THEN
        INSERT INTO tickq_key_cursors (type, key) VALUES (typ, last)
        ON CONFLICT (type) DO UPDATE SET key = EXCLUDED.key;
    END IF;
END
$$;

-- The due jobs of limited types, as many as their limits allow now; the rate limit's
-- starts are written here, a keyed type's by tickq_due_keyed. One claimer at a time looks
-- at a type (a transaction-scoped advisory lock, which transaction poolers allow); others
-- skip it rather than wait. Running jobs whose lease ran out don't count: their worker is
-- gone; jobs claimed ahead, waiting in a worker's line, count as running. for_ahead: for
-- a claim ahead (jobs once refunded are skipped), which takes rate-limited types only
-- when the claimer says within how many seconds (`wait`) it starts each job or gives it
-- back unstarted: its start is written at that time, so however late in that time it
-- starts, no window of the period holds more starts than the limit.
CREATE FUNCTION tickq_due_limited(lim integer, queues text[], at timestamptz,
                                  for_ahead boolean DEFAULT false,
                                  wait double precision DEFAULT NULL)
RETURNS SETOF bigint
LANGUAGE plpgsql VOLATILE
SET enable_sort = off
SET enable_bitmapscan = off
AS $$
DECLARE
    t record;
    ts timestamptz;
    allowed integer;
    ids bigint[];
    keyed integer;
BEGIN
    FOR t IN SELECT l.type, l.concurrency, l.rate, l.per, l.keyed FROM tickq_limits l
             ORDER BY l.type LOOP
        EXIT WHEN lim <= 0;
        CONTINUE WHEN for_ahead AND wait IS NULL AND t.rate IS NOT NULL;
        CONTINUE WHEN NOT pg_try_advisory_xact_lock(
            hashtext('tickq_limit'), hashtext(current_schema() || '.' || t.type));
        -- The time once the lock is held, not the transaction's start: the starts the rate
        -- limit counts are then in the order they happened.
        ts := COALESCE(at, clock_timestamp());
        IF t.keyed THEN
            RETURN QUERY SELECT tickq_due_keyed(t.type, t.concurrency, t.rate, t.per, lim,
                                                queues, ts, for_ahead, COALESCE(wait, 0));
            GET DIAGNOSTICS keyed = ROW_COUNT;
            lim := lim - keyed;
            CONTINUE;
        END IF;
        allowed := lim;
        IF t.concurrency IS NOT NULL THEN
            allowed := LEAST(allowed, t.concurrency - (
                SELECT count(*) FROM tickq_jobs
                WHERE status = 'running' AND type = t.type AND lease_expires_at > ts));
        END IF;
        IF t.rate IS NOT NULL THEN
            allowed := LEAST(allowed, t.rate - (
                SELECT count(*) FROM tickq_starts
                WHERE type = t.type AND tickq_starts.at > ts - make_interval(secs => t.per)));
        END IF;
        CONTINUE WHEN allowed <= 0;
        ids := ARRAY(
            SELECT id FROM tickq_jobs
            WHERE status = 'pending' AND run_after <= ts AND type = t.type
              AND (queues IS NULL OR queue = ANY(queues)) AND (NOT for_ahead OR ahead < 2)
              AND NOT EXISTS (SELECT 1 FROM tickq_paused p WHERE p.queue = tickq_jobs.queue)
            ORDER BY priority DESC, run_after, id
            LIMIT allowed
            FOR UPDATE SKIP LOCKED);
        IF t.rate IS NOT NULL AND cardinality(ids) > 0 THEN
            DELETE FROM tickq_starts
            WHERE type = t.type AND tickq_starts.at <= ts - make_interval(secs => t.per);
            INSERT INTO tickq_starts (type, at)
            SELECT t.type, ts + make_interval(secs => COALESCE(wait, 0)) FROM unnest(ids);
        END IF;
        lim := lim - cardinality(ids);
        RETURN QUERY SELECT unnest(ids);
    END LOOP;
END
$$;

-- Up to `lim` due jobs (at: the injected clock's now, NULL: the database's) in `queues`
-- (NULL: all) for a claim to start at once: limited types first, through
-- tickq_due_limited; paused queues skipped. A keyed type's job without a key (enqueued
-- before the type had one) is claimed as if the type were unlimited: never stranded. With no queue paused and no limit declared it
-- is one walk of the claim index (two probes of empty tables more). First, one probe of
-- the due index (schema 26): with nothing due it returns at once, since the claim index,
-- in priority order, can't stop at the first job not due yet and would read every
-- pending job's entry (100,000 jobs due tomorrow: 495 buffers for an empty claim).
CREATE FUNCTION tickq_due(lim integer, queues text[], at timestamptz)
RETURNS SETOF bigint
LANGUAGE plpgsql VOLATILE
SET enable_sort = off
SET enable_bitmapscan = off
AS $$
DECLARE
    taken integer := 0;
BEGIN
    -- min(): the due index's first entry, whatever the plan (an EXISTS with the time as a
    -- parameter got a generic plan that scanned the table).
    IF COALESCE((SELECT min(run_after) FROM tickq_jobs WHERE status = 'pending')
                > COALESCE(at, now()), true) THEN
        RETURN;  -- nothing due (or nothing pending): see the comment above
    END IF;
    IF EXISTS (SELECT 1 FROM tickq_limits) THEN
        RETURN QUERY SELECT tickq_due_limited(lim, queues, at);
        GET DIAGNOSTICS taken = ROW_COUNT;
    ELSIF NOT EXISTS (SELECT 1 FROM tickq_paused) THEN
        RETURN QUERY
        SELECT id FROM tickq_jobs
        WHERE status = 'pending' AND run_after <= COALESCE(at, now())
          AND (queues IS NULL OR queue = ANY(queues))
        ORDER BY priority DESC, run_after, id
        LIMIT lim
        FOR UPDATE SKIP LOCKED;
        RETURN;
    END IF;
    IF lim - taken > 0 THEN
        RETURN QUERY
        SELECT id FROM tickq_jobs
        WHERE status = 'pending' AND run_after <= COALESCE(at, now())
          AND (queues IS NULL OR queue = ANY(queues))
          AND NOT EXISTS (SELECT 1 FROM tickq_paused p WHERE p.queue = tickq_jobs.queue)
          AND NOT EXISTS (SELECT 1 FROM tickq_limits l WHERE l.type = tickq_jobs.type
                          AND (NOT l.keyed OR tickq_jobs.concurrency_key IS NOT NULL))
        ORDER BY priority DESC, run_after, id
        LIMIT lim - taken
        FOR UPDATE SKIP LOCKED;
    END IF;
END
$$;

-- tickq_due for claims ahead of a worker's free slots (the same probe first): the same walk, skipping jobs once
-- refunded (ahead = 2) and paused queues; limited types are claimed ahead within their
-- room, through tickq_due_limited (a job claimed ahead counts as running until it ends;
-- with a rate limit, as started at the latest time it may start: `wait` seconds from
-- now, within which the claimer starts it or gives it back; NULL: rate-limited types are
-- not claimed ahead).
CREATE FUNCTION tickq_due_ahead(lim integer, queues text[], at timestamptz,
                                wait double precision DEFAULT NULL)
RETURNS SETOF bigint
LANGUAGE plpgsql VOLATILE
SET enable_sort = off
SET enable_bitmapscan = off
AS $$
DECLARE
    taken integer;
BEGIN
    -- min(): the due index's first entry, whatever the plan (an EXISTS with the time as a
    -- parameter got a generic plan that scanned the table).
    IF COALESCE((SELECT min(run_after) FROM tickq_jobs WHERE status = 'pending')
                > COALESCE(at, now()), true) THEN
        RETURN;  -- nothing due (or nothing pending): see the comment above
    END IF;
    IF NOT EXISTS (SELECT 1 FROM tickq_limits) AND NOT EXISTS (SELECT 1 FROM tickq_paused) THEN
        RETURN QUERY
        SELECT id FROM tickq_jobs
        WHERE status = 'pending' AND run_after <= COALESCE(at, now())
          AND (queues IS NULL OR queue = ANY(queues)) AND ahead < 2
        ORDER BY priority DESC, run_after, id
        LIMIT lim
        FOR UPDATE SKIP LOCKED;
        RETURN;
    END IF;
    IF EXISTS (SELECT 1 FROM tickq_limits) THEN
        RETURN QUERY SELECT tickq_due_limited(lim, queues, at, true, wait);
        GET DIAGNOSTICS taken = ROW_COUNT;
        lim := lim - taken;
    END IF;
    IF lim <= 0 THEN
        RETURN;
    END IF;
    RETURN QUERY
    SELECT id FROM tickq_jobs
    WHERE status = 'pending' AND run_after <= COALESCE(at, now())
      AND (queues IS NULL OR queue = ANY(queues)) AND ahead < 2
      AND NOT EXISTS (SELECT 1 FROM tickq_paused p WHERE p.queue = tickq_jobs.queue)
      AND NOT EXISTS (SELECT 1 FROM tickq_limits l WHERE l.type = tickq_jobs.type
                      AND (NOT l.keyed OR tickq_jobs.concurrency_key IS NOT NULL))
    ORDER BY priority DESC, run_after, id
    LIMIT lim
    FOR UPDATE SKIP LOCKED;
END
$$;
