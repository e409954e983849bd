-- tickq schema 17 (SQLite): durable workflows (docs/workflows.md). A run is its driver job
-- (type 'tickq.workflow', same id) replaying the workflow function; its steps are
-- recorded here, each step job's end recorded and the run woken by the triggers below, in
-- the transaction that ends the job, whichever transition ends it.
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
