-- Named queries of durable workflows for PostgreSQL (loaded with postgres.sql; see
-- store/workflows.py). "Now" is the database clock unless a clock was injected.

-- name: wf_insert_run
INSERT INTO tickq_workflow_runs (id, workflow, payload, created_at, updated_at)
VALUES (:id, :workflow, CAST(:payload AS json), COALESCE(CAST(:now AS timestamptz), now()),
        COALESCE(CAST(:now AS timestamptz), now()))

-- name: wf_timers_due
-- The run's sleeps that are over and waits that timed out, ended before it replays (a wait
-- that got its event first is done already: each row ends once, by whichever comes first).
UPDATE tickq_workflow_steps
SET status = CASE WHEN kind = 'sleep' THEN 'done' ELSE 'timed_out' END,
    finished_at = COALESCE(CAST(:now AS timestamptz), now())
WHERE run_id = :run AND status = 'waiting'
  AND wake_at <= COALESCE(CAST(:now AS timestamptz), now())

-- name: wf_run
SELECT id, workflow, status, CAST(payload AS text), CAST(result AS text), error, wakes,
       created_at, updated_at, finished_at
FROM tickq_workflow_runs WHERE id = :run

-- name: wf_replay_run
-- The run as a replay reads it, with the time its timers are judged by.
SELECT id, workflow, status, CAST(payload AS text), CAST(result AS text), error, wakes, created_at, updated_at,
       finished_at, COALESCE(CAST(:now AS timestamptz), now())
FROM tickq_workflow_runs WHERE id = :run

-- name: wf_runs
SELECT id, workflow, status, CAST(payload AS text), CAST(result AS text), error, wakes,
       created_at, updated_at, finished_at
FROM tickq_workflow_runs
WHERE (CAST(:status AS text) IS NULL OR status = :status)
  AND (CAST(:workflow AS text) IS NULL OR workflow = :workflow)
  AND (CAST(:before_id AS bigint) IS NULL OR id < :before_id)
ORDER BY id DESC LIMIT :limit

-- name: wf_steps
-- A step job's attempts and error are read from its row while it runs (it may be pruned
-- once it ended: they were recorded then).
SELECT s.seq, s.kind, s.name, s.status, s.job_id, s.event_key, s.event_id, s.wake_at,
       COALESCE(j.attempts, s.attempts), CAST(s.result AS text),
       COALESCE(s.error, CASE WHEN s.status = 'pending' THEN j.last_error END),
       s.created_at, s.finished_at
FROM tickq_workflow_steps s LEFT JOIN tickq_jobs j ON j.id = s.job_id
WHERE s.run_id = :run ORDER BY s.seq

-- name: wf_fence
-- The driver still holds its attempt (its row locked: no rescue takes it meanwhile), and
-- the run's status.
SELECT r.status FROM tickq_jobs j JOIN tickq_workflow_runs r ON r.id = j.id
WHERE j.id = :run AND j.status = 'running' AND j.lease_owner = :owner
  AND j.attempts = :attempt
FOR UPDATE OF j

-- name: wf_lock_event
-- One transaction at a time sends or starts waiting for an event of (name, key), so an
-- event racing a run that is just starting to wait is seen by one of the two.
SELECT pg_advisory_xact_lock(hashtext('tickq_event'),
                             hashtext(current_schema() || '.' || :name || chr(31) || :key))

-- name: wf_held
-- (A fragment.) The driver still holds its attempt and its run goes on: what every
-- statement of a replay's record checks (see record_steps; wf_fence locked the driver).
EXISTS (SELECT 1 FROM tickq_jobs d JOIN tickq_workflow_runs r ON r.id = d.id
        WHERE d.id = :run AND d.status = 'running' AND d.lease_owner = :owner
          AND d.attempts = :attempt AND r.status IN ('running', 'waiting'))

-- name: wf_insert_step_job
-- A step's job, once: its unique key is the run's and the step's (as insert, but only while
-- the driver holds its attempt). Wakes listening workers at commit ({@wake}).
WITH j AS (
    INSERT INTO tickq_jobs (type, queue, payload, priority, max_attempts, run_after,
                            unique_key, unique_scope, meta, created_at, updated_at,
                            concurrency_key)
    SELECT CAST(:type AS text), CAST(:queue AS text), CAST(:payload AS json),
           CAST(:priority AS int), CAST(:max_attempts AS int),
           COALESCE(CAST(:run_after AS timestamptz), COALESCE(CAST(:now AS timestamptz), now())),
           CAST(:unique_key AS text), CAST(:unique_scope AS text), CAST(:meta AS jsonb),
           COALESCE(CAST(:now AS timestamptz), now()), COALESCE(CAST(:now AS timestamptz), now()),
           COALESCE(CAST(:concurrency_key AS text), CASE WHEN CAST(:unregistered AS boolean)
               THEN (SELECT '' FROM tickq_limits l WHERE l.type = :type AND l.keyed) END)
    WHERE {@wf_held}
    ON CONFLICT DO NOTHING
    RETURNING queue, run_after),
due AS (SELECT queue, run_after FROM j),
{@wake}
SELECT count(*) FROM wake

-- name: wf_add_job_step
INSERT INTO tickq_workflow_steps (run_id, seq, kind, name, status, job_id, created_at)
SELECT CAST(:run AS bigint), CAST(:seq AS int), 'job', CAST(:name AS text), 'pending',
       (SELECT id FROM tickq_jobs WHERE unique_key = :unique_key AND unique_scope = 'all'),
       COALESCE(CAST(:now AS timestamptz), now())
WHERE {@wf_held}
ON CONFLICT DO NOTHING

-- name: wf_add_step
-- A sleep (waiting) or a recorded value (done).
INSERT INTO tickq_workflow_steps (run_id, seq, kind, name, status, wake_at, result,
                                  created_at, finished_at)
SELECT CAST(:run AS bigint), CAST(:seq AS int), CAST(:kind AS text), CAST(:name AS text),
       CAST(:status AS text), CAST(:wake_at AS timestamptz), CAST(:result AS json), COALESCE(CAST(:now AS timestamptz), now()),
       CASE WHEN CAST(:status AS text) = 'done' THEN COALESCE(CAST(:now AS timestamptz), now()) END
WHERE {@wf_held}
ON CONFLICT DO NOTHING

-- name: wf_add_event_step
-- A wait: done at once with the oldest event kept for (name, key) that this run has not
-- received yet, else waiting (under the event's lock: wf_lock_event).
INSERT INTO tickq_workflow_steps (run_id, seq, kind, name, status, event_key, event_id,
                                  wake_at, result, created_at, finished_at)
SELECT CAST(:run AS bigint), CAST(:seq AS int), 'event', CAST(:name AS text),
       CASE WHEN e.id IS NULL THEN 'waiting' ELSE 'done' END, CAST(:key AS text), e.id,
       CAST(:wake_at AS timestamptz), e.data, COALESCE(CAST(:now AS timestamptz), now()),
       CASE WHEN e.id IS NOT NULL THEN COALESCE(CAST(:now AS timestamptz), now()) END
FROM (SELECT 1) AS one LEFT JOIN (
    SELECT id, data FROM tickq_workflow_events
    WHERE name = :name AND key = :key AND expires_at > COALESCE(CAST(:now AS timestamptz), now())
      AND id NOT IN (SELECT event_id FROM tickq_workflow_steps
                     WHERE run_id = :run AND event_id IS NOT NULL)
    ORDER BY id LIMIT 1) AS e ON true
WHERE {@wf_held}
ON CONFLICT DO NOTHING

-- name: wf_delivered
-- Whether a wait just recorded got a kept event at once (the replay then goes on).
SELECT count(*) FROM tickq_workflow_steps
WHERE run_id = :run AND seq >= :first AND kind = 'event' AND event_id IS NOT NULL

-- name: wf_suspend
-- The driver's due time as it suspends: its timer, or now when its run was woken since the
-- replay read it (a step ended or an event came meanwhile: it replays again at once). A
-- wake after this moves run_after sooner itself; the suspended transition keeps it. Not
-- when a wait just got a kept event: the replay goes on.
UPDATE tickq_jobs
SET run_after = CASE WHEN (SELECT wakes FROM tickq_workflow_runs WHERE id = :run) = :seen
                     THEN CAST(:due AS timestamptz) ELSE COALESCE(CAST(:now AS timestamptz), now()) END
WHERE id = :run AND {@wf_held} AND NOT EXISTS (
    SELECT 1 FROM tickq_workflow_steps
    WHERE run_id = :run AND seq >= :first AND kind = 'event' AND event_id IS NOT NULL)

-- name: wf_set_status
UPDATE tickq_workflow_runs SET status = :status, updated_at = COALESCE(CAST(:now AS timestamptz), now())
WHERE id = :run AND {@wf_held} AND NOT EXISTS (
    SELECT 1 FROM tickq_workflow_steps
    WHERE run_id = :run AND seq >= :first AND kind = 'event' AND event_id IS NOT NULL)

-- name: wf_insert_event
INSERT INTO tickq_workflow_events (name, key, data, created_at, expires_at)
VALUES (:name, :key, CAST(:data AS json), COALESCE(CAST(:now AS timestamptz), now()),
        COALESCE(CAST(:now AS timestamptz), now()) + make_interval(secs => :keep))
RETURNING id

-- name: wf_deliver
-- Every run waiting for (name, key) gets the event (a wait ends once: done or timed out).
UPDATE tickq_workflow_steps
SET status = 'done', result = CAST(:data AS json), event_id = :event,
    finished_at = COALESCE(CAST(:now AS timestamptz), now())
WHERE kind = 'event' AND status = 'waiting' AND name = :name AND event_key = :key
RETURNING run_id

-- name: wf_wake
-- Runs (:runs) that got something: replayed now (a driver replaying right then sees the
-- count moved when it suspends).
UPDATE tickq_workflow_runs SET wakes = wakes + 1 WHERE id = ANY(CAST(:runs AS bigint[]))

-- name: wf_wake_drivers
-- Listening workers are notified at commit ({@wake}). No test of run_after in the WHERE:
-- the update must wait for a replay writing a driver's due time right now, then move it
-- sooner (a row that did not match in this statement's snapshot would be skipped).
WITH w AS (
    UPDATE tickq_jobs
    SET run_after = LEAST(run_after, COALESCE(CAST(:now AS timestamptz), now()))
    WHERE id = ANY(CAST(:runs AS bigint[])) AND status IN ('pending', 'running')
    RETURNING queue, run_after),
due AS (SELECT queue, run_after FROM w),
{@wake}
SELECT count(*) FROM wake

-- name: wf_cancel_run
UPDATE tickq_workflow_runs
SET status = 'cancelled', error = COALESCE(error, :error),
    finished_at = COALESCE(finished_at, CAST(:now AS timestamptz), now()),
    updated_at = COALESCE(CAST(:now AS timestamptz), now())
WHERE id = :run AND status IN ('running', 'waiting', 'cancelled')
RETURNING id

-- name: wf_close_waits
UPDATE tickq_workflow_steps
SET status = 'cancelled', finished_at = COALESCE(CAST(:now AS timestamptz), now())
WHERE run_id = :run AND status = 'waiting'

-- name: wf_open_jobs
SELECT job_id FROM tickq_workflow_steps
WHERE run_id = :run AND kind = 'job' AND status = 'pending'

-- name: wf_counts
SELECT workflow, status, count(*) FROM tickq_workflow_runs GROUP BY workflow, status

-- name: wf_forget_events
DELETE FROM tickq_workflow_events WHERE expires_at <= COALESCE(CAST(:now AS timestamptz), now())

-- name: wf_reopen_step
-- A failed run's failed step, back to pending for its job's retry by hand.
UPDATE tickq_workflow_steps
SET status = 'pending', result = NULL, error = NULL, finished_at = NULL
WHERE run_id = :run AND seq = :seq AND kind = 'job' AND status IN ('failed', 'cancelled')
RETURNING job_id

-- name: wf_prune_steps
DELETE FROM tickq_workflow_steps
WHERE run_id IN (SELECT id FROM tickq_workflow_runs
                 WHERE status IN ('done', 'failed', 'cancelled') AND finished_at < :cutoff)

-- name: wf_prune_runs
DELETE FROM tickq_workflow_runs
WHERE status IN ('done', 'failed', 'cancelled') AND finished_at < :cutoff
