-- Named queries for PostgreSQL. Parameters are :name (turned into %(name)s on load).
-- "Now" is the database clock unless a clock was injected (:now is then not null), so
-- clock skew between machines can neither run jobs early nor strand them.

-- name: insert
-- pg_notify wakes listening workers at commit (never for a rolled-back enqueue), for jobs
-- due now or soon ({@wake}); the channel is named after this table's oid, so apps sharing
-- a database in different schemas don't wake each other. Identical notifications in one
-- transaction are sent once. The concurrency key is the one enqueue computed; a job
-- enqueued by a process that doesn't register its type gets '' if the type is keyed.
WITH j AS (
    INSERT INTO tickq_jobs (type, queue, payload, priority, max_attempts, run_after,
                            unique_key, unique_scope, meta, created_at, updated_at,
                            concurrency_key)
    VALUES (:type, :queue, CAST(:payload AS json), :priority, :max_attempts,
            COALESCE(CAST(:run_after AS timestamptz), CAST(:now AS timestamptz), now()),
            :unique_key, :unique_scope, CAST(:meta AS jsonb),
            COALESCE(CAST(:now AS timestamptz), now()), COALESCE(CAST(:now AS timestamptz), now()),
            COALESCE(CAST(:concurrency_key AS text), CASE WHEN CAST(:unregistered AS boolean)
                THEN (SELECT '' FROM tickq_limits l WHERE l.type = :type AND l.keyed) END))
    ON CONFLICT DO NOTHING
    RETURNING id, queue, run_after),
due AS (SELECT queue, run_after FROM j),
{@wake}
SELECT j.id FROM j WHERE (SELECT count(*) FROM wake) >= 0

-- name: insert_many
-- One statement for many jobs; wakes workers like insert does (once per queue).
WITH j AS (
    INSERT INTO tickq_jobs (type, queue, payload, priority, max_attempts, run_after,
                            unique_key, unique_scope, meta, created_at, updated_at,
                            concurrency_key)
    SELECT r.type, r.queue, CAST(r.payload AS json), r.priority, r.max_attempts,
           COALESCE(CAST(r.run_after AS timestamptz), CAST(:now AS timestamptz), now()),
           r.unique_key, r.unique_scope, CAST(r.meta AS jsonb),
           COALESCE(CAST(:now AS timestamptz), now()), COALESCE(CAST(:now AS timestamptz), now()),
           COALESCE(r.concurrency_key, CASE WHEN r.unregistered
               THEN (SELECT '' FROM tickq_limits l WHERE l.type = r.type AND l.keyed) END)
    FROM unnest(CAST(:types AS text[]), CAST(:queues AS text[]), CAST(:payloads AS text[]),
                CAST(:priorities AS int[]), CAST(:max_attempts AS int[]),
                CAST(:run_afters AS text[]), CAST(:unique_keys AS text[]),
                CAST(:unique_scopes AS text[]), CAST(:metas AS text[]),
                CAST(:concurrency_keys AS text[]), CAST(:unregistereds AS boolean[]))
         WITH ORDINALITY AS r(type, queue, payload, priority, max_attempts, run_after,
                              unique_key, unique_scope, meta, concurrency_key, unregistered, ord)
    ORDER BY r.ord
    ON CONFLICT DO NOTHING
    RETURNING id, unique_key, queue, run_after),
due AS (SELECT queue, run_after FROM j),
{@wake}
SELECT j.id, j.unique_key FROM j WHERE (SELECT count(*) FROM wake) >= 0

-- name: wake
-- Not a query: the CTE that statements putting jobs in line end with (insert, insert_many,
-- settled), after a CTE "due" (queue, run_after) of those jobs. One notification
-- per queue at commit: its name when a job is due now (what every version sends and
-- hears); "<queue><US><ms>" (US: chr(31)) when its first job is due in ms milliseconds, at
-- most {wake_horizon} from now (a worker learns of later ones at its next look). Identical
-- ones in a transaction are sent once; none when no job is due that soon. Included as
-- {@wake}; the statement must read "wake" (SELECT count(*) FROM wake) for it to run.
wake AS (
    SELECT pg_notify('tickq_' || CAST(CAST('tickq_jobs' AS regclass) AS oid),
                     CASE WHEN d.at <= n.ts THEN d.queue
                          ELSE d.queue || chr(31) || CAST(GREATEST(0, floor(1000 * EXTRACT(
                              EPOCH FROM d.at - COALESCE(CAST(:now AS timestamptz),
                                                         clock_timestamp())))) AS bigint)
                     END)
    FROM (SELECT queue, min(run_after) AS at FROM due GROUP BY queue) AS d,
         (SELECT COALESCE(CAST(:now AS timestamptz), now()) AS ts) AS n
    WHERE d.at <= n.ts + make_interval(secs => {wake_horizon}))

-- name: claim
-- id = ANY(ARRAY(...)) keeps the plan on the primary key; a join against the locked
-- subquery made the planner hash-join over the whole table. tickq_due (schema/postgres.sql) picks
-- and locks the due rows in claim order, always through the claim index. Claimed to start
-- at once, a job is marked 1 (unconfirmed) like a claim ahead until the next round trip
-- says it started (or records its outcome), so a process killed between this commit and
-- the job's start spends no attempt. A job once refunded stays marked 2.
UPDATE tickq_jobs
SET status = 'running', attempts = attempts + 1, lease_owner = :owner,
    ahead = CASE WHEN ahead = 2 THEN 2 ELSE 1 END,
    lease_expires_at = COALESCE(CAST(:now AS timestamptz), now())
                       + make_interval(secs => :lease_seconds),
    attempted_at = COALESCE(CAST(:now AS timestamptz), now()),
    updated_at = COALESCE(CAST(:now AS timestamptz), now())
WHERE id = ANY(ARRAY(
    SELECT tickq_due(:limit, CAST(:queues AS text[]), CAST(:now AS timestamptz))))
RETURNING {claimed_columns}

-- name: claim_ahead
-- Claimed ahead of the worker's free slots, to wait in its line: marked 1 until "started"
-- says it started. Jobs once refunded are never claimed ahead again. Limited types within
-- their room; rate-limited ones only given ahead_wait, the seconds within which the
-- claimer starts each job or gives it back (see tickq_due_ahead).
UPDATE tickq_jobs
SET status = 'running', attempts = attempts + 1, lease_owner = :owner, ahead = 1,
    lease_expires_at = COALESCE(CAST(:now AS timestamptz), now())
                       + make_interval(secs => :lease_seconds),
    attempted_at = COALESCE(CAST(:now AS timestamptz), now()),
    updated_at = COALESCE(CAST(:now AS timestamptz), now())
WHERE id = ANY(ARRAY(
    SELECT tickq_due_ahead(:limit, CAST(:queues AS text[]), CAST(:now AS timestamptz),
                    CAST(:ahead_wait AS float8))))
RETURNING {claimed_columns}

-- name: commit_unflushed
-- First in a round trip whose commit need only survive this process being killed, not the
-- server losing power (record_and_claim's durable=False: a tick's or process_jobs' commits
-- before its last). The commit then does not wait for the WAL to reach the disk; it is
-- visible and kept as any other, and the next synchronous commit flushes it with its own.
-- Local to the round trip's transaction (safe behind a transaction pooler).
SELECT set_config('synchronous_commit', 'off', true)

-- name: started
-- Claimed jobs that the worker started: a rescue now counts their attempt.
UPDATE tickq_jobs SET ahead = 0
WHERE id = ANY(CAST(:ids AS bigint[])) AND status = 'running' AND ahead = 1
  AND lease_owner = :owner
  AND attempts = {of_job:attempts:int}
RETURNING id

-- name: next_status
-- (A fragment.) The status a row's decision moves it to. A batch of decisions, all of one
-- kind of outcome, is arrays lined up with :ids, ascending (attempts, delays, errors,
-- results, seconds), one element per outcome, {of_job:...} reading this job's; the kind's
-- row of job.STATE_MACHINE (:next_status, :attempt_change, :snooze_change, :finishes,
-- :counted) is written into the statement as constants, one text per kind (by_kind).
CAST(:next_status AS text)

-- name: error_text
-- (A fragment.) The error of a row's decision.
{of_job:errors:text}

-- name: add_attempts
-- Runs just before finish, in its transaction and under its guard, so a run is in the
-- history exactly when its outcome is: one row per decision that counts one (a success's
-- attempt is the job row itself). A snoozed run is numbered by its snooze too (its attempt
-- number is given back). A job asked to stop records its attempt as cancelled. Only for a
-- batch with such decisions: a batch of successes runs finish alone.
INSERT INTO tickq_attempts (job_id, attempt, snooze, started_at, finished_at, outcome, error,
                            duration)
SELECT id, attempts,
       CASE WHEN CAST(:snooze_change AS int) > 0 AND cancel_requested_at IS NULL
            THEN snoozes + CAST(:snooze_change AS int) ELSE 0 END,
       attempted_at, COALESCE(CAST(:now AS timestamptz), now()),
       CASE WHEN {asked_to_stop} THEN 'cancelled' ELSE CAST(:counted AS text) END,
       CASE WHEN {asked_to_stop} THEN {stop_error} ELSE {@error_text} END,
       {of_job:seconds:float8}
FROM tickq_jobs
WHERE id = ANY(CAST(:ids AS bigint[])) AND (status = 'running') IS TRUE
  AND lease_owner = :owner AND attempts = {of_job:attempts:int}
  AND CAST(:counted AS text) IS NOT NULL
ON CONFLICT DO NOTHING

-- name: finish
-- Applies a batch of decisions (see next_status), each guarded by (running, attempt,
-- owner), so a late or repeated one changes nothing. The one decision left to SQL is
-- {asked_to_stop}: a job asked to stop ends cancelled, its attempt counted. An error of
-- NULL keeps the last one (a success, a snoozed run); a delay of NULL keeps run_after. The
-- job row's duration and result are read only once it is done. Jobs back in line wake
-- listening workers when settled reads them back. The guard "(status = 'running') IS
-- TRUE" keeps the planner off the partial lease index (with many running jobs it would
-- scan them all): it finds the jobs of :ids by their primary key.
UPDATE tickq_jobs
SET status = CASE WHEN {asked_to_stop} THEN 'cancelled' ELSE {@next_status} END,
    attempts = attempts + CASE WHEN {asked_to_stop} THEN 0
                               ELSE CAST(:attempt_change AS int) END,
    snoozes = snoozes + CASE WHEN {asked_to_stop} THEN 0 ELSE CAST(:snooze_change AS int) END,
    snoozed_since = CASE WHEN CAST(:snooze_change AS int) > 0 AND NOT {asked_to_stop}
                         THEN COALESCE(snoozed_since, attempted_at) ELSE snoozed_since END,
    run_after = CASE WHEN {of_job:delays:float8} IS NULL THEN run_after
                     ELSE COALESCE(CAST(:now AS timestamptz), now())
                          + make_interval(secs => {of_job:delays:float8}) END,
    finished_at = CASE WHEN CAST(:finishes AS boolean) OR {asked_to_stop}
                       THEN COALESCE(CAST(:now AS timestamptz), now()) END,
    last_error = CASE WHEN {asked_to_stop} THEN {stop_error}
                      ELSE COALESCE({@error_text}, last_error) END,
    duration = {of_job:seconds:float8}, result = {of_job:results:json},
    ahead = CASE WHEN ahead = 2 THEN 2 ELSE 0 END,
    lease_owner = NULL, lease_expires_at = NULL,
    updated_at = COALESCE(CAST(:now AS timestamptz), now())
WHERE id = ANY(CAST(:ids AS bigint[])) AND (status = 'running') IS TRUE
  AND lease_owner = :owner AND attempts = {of_job:attempts:int}
RETURNING id, status

-- name: settled
-- The jobs of :ids as finish left them (read in its transaction), for hooks and alerts;
-- those back in line wake listening workers for their due time ({@wake}). Not in finish:
-- a batch of successes, the common one, would pay for the wake CTE on every round trip.
WITH due AS (SELECT queue, run_after FROM tickq_jobs
             WHERE id = ANY(CAST(:ids AS bigint[])) AND status = 'pending'),
{@wake}
SELECT {job_columns} FROM tickq_jobs
WHERE id = ANY(CAST(:ids AS bigint[])) AND (SELECT count(*) FROM wake) >= 0

-- name: release
-- Back to pending, the attempt not counted: the jobs of :ids (with :attempts, :ran and
-- :errors lined up with them). A run cut short (ran: it had started) keeps a history row,
-- numbered minus the attempt it gave back (as a refund is) and told apart from a refund
-- and from earlier releases of that number by a negative snooze number. The guard is
-- written as finish's is, for the same reason.
WITH j AS (
    UPDATE tickq_jobs
    SET status = 'pending', attempts = attempts - 1, lease_owner = NULL,
        ahead = CASE WHEN ahead = 2 THEN 2 ELSE 0 END,
        lease_expires_at = NULL, updated_at = COALESCE(CAST(:now AS timestamptz), now())
    WHERE id = ANY(CAST(:ids AS bigint[])) AND (status = 'running') IS TRUE
      AND lease_owner = :owner AND attempts = {of_job:attempts:int}
      AND cancel_requested_at IS NULL
    RETURNING id, attempts + 1 AS attempt, attempted_at, {of_job:ran:boolean} AS ran,
              {of_job:errors:text} AS error_text),
a AS (
    INSERT INTO tickq_attempts (job_id, attempt, snooze, started_at, finished_at, outcome,
                                error)
    SELECT j.id, -j.attempt,
           -1 - (SELECT count(*) FROM tickq_attempts p
                 WHERE p.job_id = j.id AND p.attempt = -j.attempt AND p.snooze < 0),
           j.attempted_at, COALESCE(CAST(:now AS timestamptz), now()), 'released',
           j.error_text
    FROM j WHERE j.ran
    ON CONFLICT DO NOTHING)
SELECT id FROM j

-- name: extend_leases
-- Also confirms the start of the :started ones (a renewal is the next round trip of a
-- process running a long job). The second column says the job was asked to stop.
UPDATE tickq_jobs
SET lease_expires_at = COALESCE(CAST(:now AS timestamptz), now())
                       + make_interval(secs => :lease_seconds),
    ahead = CASE WHEN ahead = 1 AND id = ANY(CAST(:started AS bigint[])) THEN 0 ELSE ahead END
WHERE status = 'running' AND lease_owner = :owner AND id = ANY(CAST(:ids AS bigint[]))
RETURNING id, cancel_requested_at IS NOT NULL

-- name: cancel_requests
-- Which of the owner's running jobs were asked to stop: a read, between lease renewals.
SELECT id FROM tickq_jobs
WHERE id = ANY(CAST(:ids AS bigint[])) AND status = 'running' AND lease_owner = :owner
  AND cancel_requested_at IS NOT NULL

-- name: refund_expired
-- Runs just before rescue_expired, in the same transaction: a claimed job whose start was
-- never confirmed goes back with its attempt refunded, marked 2 (refunded at most once).
-- The history keeps the refund as a row of its own, numbered minus the attempt it gave
-- back (that number is used again by the next run); its SELECT reads the rows as they
-- were before the UPDATE (one snapshot for the whole statement).
WITH expired AS (
    SELECT id FROM tickq_jobs
    WHERE status = 'running' AND ahead = 1 AND cancel_requested_at IS NULL
      AND lease_expires_at < COALESCE(CAST(:now AS timestamptz), now())
      AND {holders_back}
    FOR UPDATE SKIP LOCKED),
history AS (
    INSERT INTO tickq_attempts (job_id, attempt, started_at, finished_at, outcome, error)
    SELECT t.id, -t.attempts, t.attempted_at, COALESCE(CAST(:now AS timestamptz), now()),
           'refunded', {refund_error}
    FROM tickq_jobs t JOIN expired ON t.id = expired.id
    ON CONFLICT DO NOTHING),
j AS (
    UPDATE tickq_jobs t
    SET status = 'pending', attempts = t.attempts - 1, ahead = 2,
        run_after = COALESCE(CAST(:now AS timestamptz), now()),
        lease_owner = NULL, lease_expires_at = NULL,
        updated_at = COALESCE(CAST(:now AS timestamptz), now())
    FROM expired WHERE t.id = expired.id
    RETURNING t.*)
SELECT {job_columns} FROM j

-- name: rescue_expired
-- {rescued_status}: pending, or failed when out of attempts (job.STATE_MACHINE's rule);
-- cancelled when the job was asked to stop. {holders_back}: none in the first :grace
-- seconds after the server started (a lease that ran out while it was down was held by
-- a process that could not renew; it gets that long to reconnect), as refund_expired.
WITH expired AS (
    SELECT id FROM tickq_jobs
    WHERE status = 'running' AND lease_expires_at < COALESCE(CAST(:now AS timestamptz), now())
      AND {holders_back}
    FOR UPDATE SKIP LOCKED),
j AS (
    UPDATE tickq_jobs t
    SET status = {rescued_status},
        finished_at = CASE WHEN {out_of_attempts} OR t.cancel_requested_at IS NOT NULL
                           THEN COALESCE(CAST(:now AS timestamptz), now()) END,
        last_error = {expired_error},
        run_after = COALESCE(CAST(:now AS timestamptz), now()),
        lease_owner = NULL, lease_expires_at = NULL,
        updated_at = COALESCE(CAST(:now AS timestamptz), now())
    FROM expired WHERE t.id = expired.id
    RETURNING t.*),
a AS (
    INSERT INTO tickq_attempts (job_id, attempt, started_at, finished_at, outcome, error)
    SELECT id, attempts, attempted_at, updated_at,
           CASE WHEN cancel_requested_at IS NULL THEN 'lease_expired' ELSE 'cancelled' END,
           last_error FROM j
    ON CONFLICT DO NOTHING)
SELECT {job_columns} FROM j

-- name: list
SELECT {job_columns} FROM tickq_jobs
WHERE (CAST(:status AS text) IS NULL OR status = :status)
  AND (CAST(:type AS text) IS NULL OR type = :type)
  AND (CAST(:queue AS text) IS NULL OR queue = :queue)
  AND (CAST(:before_id AS bigint) IS NULL OR id < :before_id)
ORDER BY id DESC LIMIT :limit

-- name: retry
-- A retry by hand gives the job one more attempt and a new max_snooze.
UPDATE tickq_jobs
SET status = 'pending', run_after = COALESCE(CAST(:now AS timestamptz), now()),
    finished_at = NULL, updated_at = COALESCE(CAST(:now AS timestamptz), now()),
    max_attempts = GREATEST(max_attempts, attempts + 1), snoozed_since = NULL,
    cancel_requested_at = NULL
WHERE id = :id AND status IN ('failed', 'cancelled')
RETURNING {job_columns}

-- name: cancel
-- A pending job is cancelled at once; a running one is asked to stop (its worker sees
-- cancel_requested_at and ends it cancelled). Asking again changes nothing. A request
-- also notifies the listening workers at commit with an empty payload (no queue has an
-- empty name): the one holding the job looks at once instead of within a second.
WITH j AS (
    UPDATE tickq_jobs
    SET status = CASE WHEN status = 'pending' THEN 'cancelled' ELSE status END,
        finished_at = CASE WHEN status = 'pending'
                           THEN COALESCE(CAST(:now AS timestamptz), now()) ELSE finished_at END,
        cancel_requested_at = CASE WHEN status = 'running'
            THEN COALESCE(cancel_requested_at, CAST(:now AS timestamptz), now()) END,
        updated_at = COALESCE(CAST(:now AS timestamptz), now())
    WHERE id = :id AND status IN ('pending', 'running')
    RETURNING *)
SELECT {job_columns_j} FROM j, LATERAL (
    SELECT CASE WHEN j.status = 'running'
                THEN pg_notify('tickq_' || CAST(CAST('tickq_jobs' AS regclass) AS oid), '')
           END) AS wake

-- name: retire_doomed
-- Not a query: the tail of a statement whose CTE "doomed" picks finished jobs to delete
-- (prune, the dashboard's delete). What they counted stays in tickq_totals (triggers
-- added it as they finished, migration 24); deleting a done job adds one to tickq_pruned.
-- Included as {@retire_doomed}.
d AS (
    DELETE FROM tickq_jobs WHERE id IN (SELECT id FROM doomed)
    RETURNING id),
a AS (
    DELETE FROM tickq_attempts WHERE job_id IN (SELECT id FROM d))
SELECT id FROM d

-- name: prune
-- What pruned rows counted stays in tickq_totals, so processed totals and the duration
-- histogram never go down.
WITH doomed AS (
    SELECT id FROM tickq_jobs
    WHERE finished_at < :cutoff AND status IN ('done', 'failed', 'cancelled')
    LIMIT :batch),
{@retire_doomed}

-- name: counts
-- Jobs by queue, status and type without reading the history: open jobs through their
-- partial indexes (claim, lease, stopped), done jobs from the counters (done_counts).
SELECT queue, status, type, count(*) FROM tickq_jobs WHERE status = 'pending'
GROUP BY queue, status, type
UNION ALL
SELECT queue, status, type, count(*) FROM tickq_jobs WHERE status = 'running'
GROUP BY queue, status, type
UNION ALL
SELECT queue, status, type, count(*) FROM tickq_jobs WHERE status IN ('failed', 'cancelled')
GROUP BY queue, status, type
UNION ALL
{@done_counts}

-- name: due_summary
SELECT count(*), min(run_after) FROM tickq_jobs
WHERE status = 'pending' AND run_after <= COALESCE(CAST(:now AS timestamptz), now())

-- name: queue_gauges
-- Per queue with pending or running jobs: how many are due now, how many are running.
SELECT queue,
       count(*) FILTER (WHERE status = 'pending'
                        AND run_after <= COALESCE(CAST(:now AS timestamptz), now())),
       count(*) FILTER (WHERE status = 'running')
FROM tickq_jobs WHERE status IN ('pending', 'running') GROUP BY queue

-- name: due_in
-- When the next pending job comes due, and "now", for a worker deciding how long to sleep.
-- Paused queues' jobs never come due. Limited types' jobs come due in the third column's
-- seconds: 0 when one of them may start now; when a rate window is full, when its first
-- start leaves it; NULL when only a running job's end frees a slot (the worker then polls).
-- A keyed type's (whose keys are not counted here, one by one): when its window's oldest
-- start, of any key, leaves it; NULL without a rate limit.
SELECT min(run_after), COALESCE(CAST(:now AS timestamptz), now()), (
    SELECT min(CASE
        WHEN l.keyed
            THEN CAST(EXTRACT(EPOCH FROM (SELECT min(s.at) FROM tickq_starts s
                 WHERE s.type = l.type AND s.at > n.ts - make_interval(secs => l.per))
                 + make_interval(secs => l.per) - n.ts) AS float8)
        WHEN l.rate IS NOT NULL AND (SELECT count(*) FROM tickq_starts s
                 WHERE s.type = l.type AND s.at > n.ts - make_interval(secs => l.per)) >= l.rate
            THEN CAST(EXTRACT(EPOCH FROM (SELECT min(s.at) FROM tickq_starts s
                 WHERE s.type = l.type AND s.at > n.ts - make_interval(secs => l.per))
                 + make_interval(secs => l.per) - n.ts) AS float8)
        WHEN l.concurrency IS NOT NULL AND (SELECT count(*) FROM tickq_jobs r
                 WHERE r.status = 'running' AND r.type = l.type AND r.lease_expires_at > n.ts)
                 >= l.concurrency
            THEN NULL
        ELSE 0 END)
    FROM tickq_limits l, (SELECT COALESCE(CAST(:now AS timestamptz), now()) AS ts) AS n
    WHERE EXISTS (SELECT 1 FROM tickq_jobs j
                  WHERE j.status = 'pending' AND j.type = l.type AND j.run_after <= n.ts
                    AND (CAST(:queues AS text[]) IS NULL OR j.queue = ANY(CAST(:queues AS text[])))
                    AND NOT EXISTS (SELECT 1 FROM tickq_paused p WHERE p.queue = j.queue))) FROM tickq_jobs
WHERE status = 'pending'
  AND (CAST(:queues AS text[]) IS NULL OR queue = ANY(CAST(:queues AS text[])))
  AND NOT EXISTS (SELECT 1 FROM tickq_paused p WHERE p.queue = tickq_jobs.queue)
  AND NOT EXISTS (SELECT 1 FROM tickq_limits l WHERE l.type = tickq_jobs.type
                  AND (NOT l.keyed OR tickq_jobs.concurrency_key IS NOT NULL))

-- name: pause
INSERT INTO tickq_paused (queue, paused_at)
VALUES (:queue, COALESCE(CAST(:now AS timestamptz), now()))
ON CONFLICT (queue) DO NOTHING
RETURNING queue

-- name: resume
-- Wakes the queue's listening workers at commit, as an enqueue would.
WITH r AS (DELETE FROM tickq_paused WHERE queue = :queue RETURNING queue)
SELECT r.queue FROM r, LATERAL (
    SELECT pg_notify('tickq_' || CAST(CAST('tickq_jobs' AS regclass) AS oid), r.queue)) AS wake

-- name: declare_limit
INSERT INTO tickq_limits (type, concurrency, rate, per, keyed, updated_at)
VALUES (:type, :concurrency, :rate, :per, :keyed, COALESCE(CAST(:now AS timestamptz), now()))
ON CONFLICT (type) DO UPDATE
SET concurrency = EXCLUDED.concurrency, rate = EXCLUDED.rate, per = EXCLUDED.per,
    keyed = EXCLUDED.keyed, updated_at = EXCLUDED.updated_at
WHERE (tickq_limits.concurrency, tickq_limits.rate, tickq_limits.per, tickq_limits.keyed)
      IS DISTINCT FROM (EXCLUDED.concurrency, EXCLUDED.rate, EXCLUDED.per, EXCLUDED.keyed)

-- name: forget_limits
-- Types this process registers without limits are no longer limited.
DELETE FROM tickq_limits WHERE type = ANY(CAST(:types AS text[]))

-- name: channel
-- The LISTEN channel insert notifies: named after this table's oid (see insert).
SELECT 'tickq_' || CAST(CAST('tickq_jobs' AS regclass) AS oid)

-- name: count_failed
SELECT count(*) FROM tickq_jobs
WHERE status = 'failed' AND (CAST(:type AS text) IS NULL OR type = :type)

-- name: retry_failed
-- One batch of failed jobs back to pending. A job whose unique_key another active job
-- holds is skipped, and of several failed jobs sharing a key only the newest is retried.
WITH batch AS (
    SELECT f.id FROM tickq_jobs f
    WHERE f.status = 'failed' AND (CAST(:type AS text) IS NULL OR f.type = :type)
      AND (f.unique_key IS NULL OR (
          NOT EXISTS (SELECT 1 FROM tickq_jobs o WHERE o.unique_key = f.unique_key
                      AND o.status IN ('pending', 'running'))
          AND f.id = (SELECT max(g.id) FROM tickq_jobs g
                      WHERE g.unique_key = f.unique_key AND g.status = 'failed')))
    ORDER BY f.id LIMIT :batch
    FOR UPDATE SKIP LOCKED)
UPDATE tickq_jobs t
SET status = 'pending', run_after = COALESCE(CAST(:now AS timestamptz), now()),
    finished_at = NULL, updated_at = COALESCE(CAST(:now AS timestamptz), now()),
    max_attempts = GREATEST(t.max_attempts, t.attempts + 1), snoozed_since = NULL
FROM batch WHERE t.id = batch.id AND t.status = 'failed'
RETURNING t.id

-- name: db_now
SELECT now()

-- Schedules and ticks (migration 2) ----------------------------------------------------

-- name: earliest_unpaused
-- (A fragment.) When the first pending job outside paused queues comes due. With no queue
-- paused (the usual case) the claim index answers alone, as it did before pauses existed.
CASE WHEN EXISTS (SELECT 1 FROM tickq_paused)
     THEN (SELECT min(run_after) FROM tickq_jobs WHERE status = 'pending'
           AND NOT EXISTS (SELECT 1 FROM tickq_paused p WHERE p.queue = tickq_jobs.queue))
     ELSE (SELECT min(run_after) FROM tickq_jobs WHERE status = 'pending') END

-- name: due_count
-- (A fragment.) How many jobs are due now outside paused queues, counted up to 1000 rows
-- (tickq.store.ticks.DUE_COUNT_CAP; 1000 means "1000 or more"): a tick reads at most that
-- many index entries, however large the backlog.
(SELECT count(*) FROM (
    SELECT 1 FROM tickq_jobs j
    WHERE j.status = 'pending' AND j.run_after <= COALESCE(CAST(:now AS timestamptz), now())
      AND NOT EXISTS (SELECT 1 FROM tickq_paused p WHERE p.queue = j.queue)
    LIMIT 1000) AS due)

-- name: tick_state
-- Everything a tick needs to know before it starts, in one round trip: the time, the
-- backlog of pending jobs (how many are due, when the earliest comes due) and each
-- schedule's cursor. A running job counts as coming due
-- when its lease runs out (if its worker died, it is rescued then).
SELECT 'now', CAST(NULL AS text), COALESCE(CAST(:now AS timestamptz), now()),
       CAST(NULL AS bigint)
UNION ALL
SELECT 'backlog', NULL, (SELECT min(t) FROM (SELECT {@earliest_unpaused} AS t
       UNION ALL SELECT min(lease_expires_at) FROM tickq_jobs WHERE status = 'running') AS m),
       {@due_count}
UNION ALL
SELECT 'schedule', name, handled_until, NULL FROM tickq_schedules

-- name: start_tick
-- Records the tick and reads tick_state's rows in one statement (SQLite runs record_tick
-- then tick_state): an empty tick stays at three round trips.
WITH recorded AS (
    INSERT INTO tickq_ticks AS t (id, last_tick_at, ticks)
    VALUES (1, COALESCE(CAST(:now AS timestamptz), now()), 1)
    ON CONFLICT (id) DO UPDATE
    SET last_tick_at = GREATEST(t.last_tick_at, EXCLUDED.last_tick_at), ticks = t.ticks + 1)
SELECT 'now', CAST(NULL AS text), COALESCE(CAST(:now AS timestamptz), now()),
       CAST(NULL AS bigint)
UNION ALL
SELECT 'backlog', NULL, (SELECT min(t) FROM (SELECT {@earliest_unpaused} AS t
       UNION ALL SELECT min(lease_expires_at) FROM tickq_jobs WHERE status = 'running') AS m),
       {@due_count}
UNION ALL
SELECT 'schedule', name, handled_until, NULL FROM tickq_schedules

-- name: tick_backlog
SELECT {@due_count},
       (SELECT min(t) FROM (SELECT {@earliest_unpaused} AS t
       UNION ALL SELECT min(lease_expires_at) FROM tickq_jobs WHERE status = 'running') AS m),
       COALESCE(CAST(:now AS timestamptz), now())

-- name: enqueue_schedule
-- Moves the schedule's cursor only from the value the tick read (or creates it when the
-- tick saw none) and inserts the slot jobs only if it moved: of racing ticks one wins, and
-- a slot whose job was pruned can never be enqueued again. The first row (id 0) says the
-- cursor moved; the others are the jobs inserted.
WITH moved AS (
    INSERT INTO tickq_schedules AS s (name, handled_until, last_slot, updated_at)
    VALUES (:name, CAST(:handled_until AS timestamptz), CAST(:last_slot AS timestamptz),
            COALESCE(CAST(:now AS timestamptz), now()))
    ON CONFLICT (name) DO UPDATE
    SET handled_until = EXCLUDED.handled_until,
        last_slot = COALESCE(EXCLUDED.last_slot, s.last_slot),
        updated_at = EXCLUDED.updated_at
    WHERE s.handled_until = CAST(:expected AS timestamptz)
    RETURNING name),
inserted AS (
    INSERT INTO tickq_jobs (type, queue, payload, priority, max_attempts, run_after,
                            unique_key, unique_scope, meta, created_at, updated_at,
                            concurrency_key)
    SELECT r.type, r.queue, CAST(r.payload AS json), r.priority, r.max_attempts,
           COALESCE(CAST(r.run_after AS timestamptz), CAST(:now AS timestamptz), now()),
           r.unique_key, r.unique_scope, CAST(r.meta AS jsonb),
           COALESCE(CAST(:now AS timestamptz), now()), COALESCE(CAST(:now AS timestamptz), now()),
           COALESCE(r.concurrency_key, CASE WHEN r.unregistered
               THEN (SELECT '' FROM tickq_limits l WHERE l.type = r.type AND l.keyed) END)
    FROM moved,
         unnest(CAST(:types AS text[]), CAST(:queues AS text[]), CAST(:payloads AS text[]),
                CAST(:priorities AS int[]), CAST(:max_attempts AS int[]),
                CAST(:run_afters AS text[]), CAST(:unique_keys AS text[]),
                CAST(:unique_scopes AS text[]), CAST(:metas AS text[]),
                CAST(:concurrency_keys AS text[]), CAST(:unregistereds AS boolean[]))
         WITH ORDINALITY AS r(type, queue, payload, priority, max_attempts, run_after,
                              unique_key, unique_scope, meta, concurrency_key, unregistered, ord)
    ORDER BY r.ord
    ON CONFLICT DO NOTHING
    RETURNING id, unique_key)
SELECT CAST(0 AS bigint), CAST(NULL AS text) FROM moved
UNION ALL
SELECT id, unique_key FROM inserted

-- name: last_tick
SELECT (SELECT last_tick_at FROM tickq_ticks WHERE id = 1),
       (SELECT ticks FROM tickq_ticks WHERE id = 1),
       COALESCE(CAST(:now AS timestamptz), now())

-- Migration bookkeeping (store/migrate.py) ----------------------------------------------

-- name: migrations_table
CREATE TABLE IF NOT EXISTS tickq_migrations (version INTEGER PRIMARY KEY,
    name TEXT NOT NULL, applied_at TIMESTAMPTZ NOT NULL DEFAULT now())

-- name: migrations_record
INSERT INTO tickq_migrations (version, name) VALUES (:version, :name)

-- Health (store/horizon.py) ---------------------------------------------------------------

-- name: long_transactions
-- Sessions of this database (but this one) whose transaction has been open longer than
-- :threshold seconds, the oldest first; holds_snapshot: it holds back vacuum's horizon.
SELECT pid, EXTRACT(EPOCH FROM clock_timestamp() - xact_start), application_name, state,
       backend_xmin IS NOT NULL OR backend_xid IS NOT NULL, CAST(xact_start AS text)
FROM pg_stat_activity
WHERE datname = current_database() AND pid <> pg_backend_pid() AND xact_start IS NOT NULL
  AND xact_start < clock_timestamp() - make_interval(secs => :threshold)
ORDER BY xact_start
LIMIT :shown

-- name: lease_expiry
-- When the first lease of a running job runs out, and "now": an idle worker sleeps until
-- then (a rescue may be due) instead of looking every few seconds.
SELECT min(lease_expires_at), COALESCE(CAST(:now AS timestamptz), now())
FROM tickq_jobs WHERE status = 'running'
