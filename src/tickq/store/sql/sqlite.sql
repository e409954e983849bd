-- Named queries for SQLite. Parameters are :name. Times are computed in Python
-- (:now, :run_after, :lease_until) as ISO-8601 UTC text.

-- name: insert
{@insert_row}
RETURNING id

-- name: insert_without_id
-- insert for executemany (which returns no rows): enqueue_many's jobs (see last_job_id).
{@insert_row}

-- name: insert_row
-- (A fragment.) One job's row, for insert and insert_without_id. The concurrency key is the
-- one enqueue computed; a job enqueued by a process that doesn't register its type gets ''
-- if the type is keyed.
INSERT INTO tickq_jobs (type, queue, payload, priority, max_attempts, run_after,
                        unique_key, unique_scope, meta, created_at, updated_at, concurrency_key)
VALUES (:type, :queue, :payload, :priority, :max_attempts, COALESCE(:run_after, :now),
        :unique_key, :unique_scope, :meta, :now, :now,
        COALESCE(:concurrency_key, CASE WHEN :unregistered
            THEN (SELECT '' FROM tickq_limits l WHERE l.type = :type AND l.keyed) END))
ON CONFLICT DO NOTHING

-- name: last_job_id
-- The highest id before enqueue_many inserts its jobs in the same write transaction: every
-- row above it is one of them (ids come from AUTOINCREMENT, in insertion order).
SELECT COALESCE(max(id), 0) FROM tickq_jobs

-- name: inserted_since
SELECT id, unique_key FROM tickq_jobs WHERE id > :since ORDER BY id

-- name: claim
-- Claimed to start at once: marked 1 (unconfirmed) like a claim ahead until the next round
-- trip says it started (or records its outcome), so a process killed between this commit
-- and the job's start spends no attempt. A job once refunded stays marked 2.
-- A keyed type's job without a key (enqueued before the type had one) is claimed as if
-- the type were unlimited: never stranded.
UPDATE tickq_jobs
{@claimed_now}
WHERE id IN (
    SELECT id FROM tickq_jobs
    WHERE status = 'pending' AND run_after <= :now
      AND (:queues IS NULL OR queue IN (SELECT value FROM json_each(:queues)))
      AND NOT EXISTS (SELECT 1 FROM tickq_paused p WHERE p.queue = tickq_jobs.queue)
      AND NOT EXISTS (SELECT 1 FROM tickq_limits l WHERE l.type = tickq_jobs.type
                      AND (NOT l.keyed OR tickq_jobs.concurrency_key IS NOT NULL))
    ORDER BY priority DESC, run_after, id
    LIMIT :limit)
RETURNING {claimed_columns}

-- name: claimed_now
-- (A fragment.) The SET of claim, claim_limited and claim_keyed: running, the attempt
-- counted, the lease taken, marked 1 (unconfirmed) until a round trip says it started; a
-- job once refunded stays marked 2.
SET status = 'running', attempts = attempts + 1, lease_owner = :owner,
    ahead = CASE WHEN ahead = 2 THEN 2 ELSE 1 END,
    lease_expires_at = :lease_until, attempted_at = :now, updated_at = :now,
    lease_clock = :lease_clock, lease_mono = :lease_mono

-- name: claim_limited
-- The due jobs of one limited type, as many as its limits allow now (BEGIN IMMEDIATE: no
-- other claim runs meanwhile). Running jobs whose lease ran out don't count: their
-- worker is gone; jobs claimed ahead, waiting in a worker's line, count as running.
-- :epoch is :now in seconds (the starts' clock). :ahead = 1: for a claim ahead (jobs once
-- refunded are skipped; marked 1 either way).
UPDATE tickq_jobs
{@claimed_now}
WHERE id IN (
    SELECT id FROM tickq_jobs
    WHERE status = 'pending' AND run_after <= :now AND type = :type
      AND (:ahead = 0 OR ahead < 2)
      AND (:queues IS NULL OR queue IN (SELECT value FROM json_each(:queues)))
      AND NOT EXISTS (SELECT 1 FROM tickq_paused p WHERE p.queue = tickq_jobs.queue)
    ORDER BY priority DESC, run_after, id
    LIMIT COALESCE((
        SELECT max(0, min(:limit,
            COALESCE(l.concurrency - (SELECT count(*) FROM tickq_jobs r
                WHERE r.status = 'running' AND r.type = l.type AND r.lease_expires_at > :now),
                :limit),
            COALESCE(l.rate - (SELECT count(*) FROM tickq_starts s
                WHERE s.type = l.type AND s.at > :epoch - l.per), :limit)))
        FROM tickq_limits l WHERE l.type = :type), 0))
RETURNING {claimed_columns}

-- name: claim_keyed
-- The due jobs of one key (:key) of a keyed type, as many as the key's limits allow now
-- (as claim_limited, counting that key's running jobs and starts only). :ahead = 1: for
-- a claim ahead (jobs once refunded are skipped; marked 1 either way).
UPDATE tickq_jobs
{@claimed_now}
WHERE id IN (
    SELECT id FROM tickq_jobs
    WHERE status = 'pending' AND type = :type AND concurrency_key = :key
      AND run_after <= :now AND (:ahead = 0 OR ahead < 2)
      AND (:queues IS NULL OR queue IN (SELECT value FROM json_each(:queues)))
      AND NOT EXISTS (SELECT 1 FROM tickq_paused p WHERE p.queue = tickq_jobs.queue)
    ORDER BY priority DESC, run_after, id
    LIMIT COALESCE((
        SELECT max(0, min(:limit,
            COALESCE(l.concurrency - (SELECT count(*) FROM tickq_jobs r
                WHERE r.status = 'running' AND r.type = l.type AND r.concurrency_key = :key
                  AND r.lease_expires_at > :now), :limit),
            COALESCE(l.rate - (SELECT count(*) FROM tickq_starts s
                WHERE s.type = l.type AND s.key = :key AND s.at > :epoch - l.per), :limit)))
        FROM tickq_limits l WHERE l.type = :type AND l.keyed), 0))
RETURNING {claimed_columns}

-- name: next_key
-- The first key after :after among a keyed type's pending jobs: one probe of
-- tickq_jobs_keyed, however many jobs a key has (first_key: with no :after; one statement
-- with ":after IS NULL OR" would scan every key's jobs).
SELECT min(concurrency_key) FROM tickq_jobs
WHERE status = 'pending' AND type = :type AND concurrency_key > :after

-- name: first_key
SELECT min(concurrency_key) FROM tickq_jobs
WHERE status = 'pending' AND type = :type AND concurrency_key IS NOT NULL

-- name: key_cursor
SELECT key FROM tickq_key_cursors WHERE type = :type

-- name: move_key_cursor
INSERT INTO tickq_key_cursors (type, key) VALUES (:type, :key)
ON CONFLICT (type) DO UPDATE SET key = excluded.key

-- name: record_starts
-- The starts of a rate-limited type just claimed (:ids), for its rate check, at :at (the
-- claim's time, or for a claim ahead the latest time its jobs may start); :key is the key
-- of a keyed type's (else NULL).
INSERT INTO tickq_starts (type, at, key)
SELECT :type, :at, :key FROM json_each(:ids)
WHERE EXISTS (SELECT 1 FROM tickq_limits WHERE type = :type AND rate IS NOT NULL)

-- name: forget_starts
-- Starts older than the type's window count no more.
DELETE FROM tickq_starts
WHERE type = :type
  AND at <= :epoch - COALESCE((SELECT per FROM tickq_limits WHERE type = :type), 0)

-- name: limited_types
SELECT type, keyed, rate FROM tickq_limits ORDER BY type

-- name: any_limits
SELECT EXISTS (SELECT 1 FROM tickq_limits)

-- name: claim_ahead
-- Claimed ahead of the worker's free slots, to wait in its line: marked 1 until "started"
-- says it started. Jobs once refunded are never claimed ahead again.
-- Limited types are claimed ahead too, within their room, by claim_limited and
-- claim_keyed first (rate-limited ones only when the claimer gives ahead_wait).
UPDATE tickq_jobs
SET status = 'running', attempts = attempts + 1, lease_owner = :owner, ahead = 1,
    lease_expires_at = :lease_until, attempted_at = :now, updated_at = :now,
    lease_clock = :lease_clock, lease_mono = :lease_mono
WHERE id IN (
    SELECT id FROM tickq_jobs
    WHERE status = 'pending' AND run_after <= :now
      AND (:queues IS NULL OR queue IN (SELECT value FROM json_each(:queues)))
      AND ahead < 2
      AND NOT EXISTS (SELECT 1 FROM tickq_paused p WHERE p.queue = tickq_jobs.queue)
      AND NOT EXISTS (SELECT 1 FROM tickq_limits l WHERE l.type = tickq_jobs.type
                      AND (NOT l.keyed OR tickq_jobs.concurrency_key IS NOT NULL))
    ORDER BY priority DESC, run_after, id
    LIMIT :limit)
RETURNING {claimed_columns}

-- name: started
-- Claimed jobs that the worker started (:pairs is [[id, attempt], ...]): a rescue now
-- counts their attempt.
UPDATE tickq_jobs SET ahead = 0
FROM (SELECT json_extract(value, '$[0]') AS id, json_extract(value, '$[1]') AS attempt
      FROM json_each(:pairs)) AS f
WHERE tickq_jobs.id = f.id AND tickq_jobs.attempts = f.attempt
  AND tickq_jobs.status = 'running' AND tickq_jobs.ahead = 1
  AND tickq_jobs.lease_owner = :owner
RETURNING tickq_jobs.id

-- name: decisions
-- (A fragment.) The decisions of :decisions, JSON [[job_id, attempt, due, error_text,
-- result_json, seconds], ...], one per outcome, all of one kind: its row of
-- job.STATE_MACHINE comes as :next_status, :attempt_change, :snooze_change, :finishes and
-- :counted (see finish).
(SELECT json_extract(value, '$[0]') AS job_id, json_extract(value, '$[1]') AS attempt,
        :next_status AS next_status, :attempt_change AS attempt_change,
        :snooze_change AS snooze_change, :finishes AS finishes,
        json_extract(value, '$[2]') AS due, json_extract(value, '$[3]') AS error_text,
        json_extract(value, '$[4]') AS result_json, json_extract(value, '$[5]') AS seconds,
        :counted AS counted
 FROM json_each(:decisions))

-- name: next_status
-- (A fragment.) The status a row's decision moves it to (see decisions).
f.next_status

-- name: error_text
-- (A fragment.) The error of a row's decision (see decisions).
f.error_text

-- name: add_attempts
-- Runs just before finish, in its transaction and under its guard, so a run is in the
-- history exactly when its outcome is: one row per decision that counts one (a success's
-- attempt is the job row itself). A snoozed run is numbered by its snooze too (its attempt
-- number is given back). A job asked to stop records its attempt as cancelled.
INSERT INTO tickq_attempts (job_id, attempt, snooze, started_at, finished_at, outcome, error,
                            duration)
SELECT id, attempts,
       CASE WHEN f.snooze_change > 0 AND cancel_requested_at IS NULL
            THEN snoozes + f.snooze_change ELSE 0 END,
       attempted_at, :now,
       CASE WHEN {asked_to_stop} THEN 'cancelled' ELSE f.counted END,
       CASE WHEN {asked_to_stop} THEN {stop_error} ELSE f.error_text END, f.seconds
FROM tickq_jobs JOIN {@decisions} AS f ON tickq_jobs.id = f.job_id
WHERE f.counted IS NOT NULL AND tickq_jobs.attempts = f.attempt
  AND tickq_jobs.status = 'running' AND tickq_jobs.lease_owner = :owner
ON CONFLICT DO NOTHING

-- name: finish
-- Applies a batch of decisions (see decisions), each guarded by (running, attempt, owner),
-- so a late or repeated one changes nothing. The one decision left to SQL is
-- {asked_to_stop}: a job asked to stop ends cancelled, its attempt counted. An error of
-- NULL keeps the last one (a success, a snooze); a due of NULL keeps run_after. The job
-- row's duration and result are read only once it is done (before, they are the last run's).
{@finish_update}
RETURNING tickq_jobs.id, tickq_jobs.status

-- name: finish_settled
-- finish for a batch holding outcomes other than successes: it returns the jobs as it
-- left them (for hooks and alerts), which settled would otherwise read after it.
{@finish_update}
RETURNING {job_columns}

-- name: finish_update
-- (A fragment.) What finish and finish_settled run (see finish).
UPDATE tickq_jobs
SET status = CASE WHEN {asked_to_stop} THEN 'cancelled' ELSE f.next_status END,
    attempts = attempts + CASE WHEN {asked_to_stop} THEN 0 ELSE f.attempt_change END,
    snoozes = snoozes + CASE WHEN {asked_to_stop} THEN 0 ELSE f.snooze_change END,
    snoozed_since = CASE WHEN f.snooze_change > 0 AND NOT {asked_to_stop}
                         THEN COALESCE(snoozed_since, attempted_at) ELSE snoozed_since END,
    run_after = COALESCE(f.due, run_after),
    finished_at = CASE WHEN f.finishes OR {asked_to_stop} THEN :now END,
    last_error = CASE WHEN {asked_to_stop} THEN {stop_error}
                      ELSE COALESCE(f.error_text, last_error) END,
    duration = f.seconds, result = f.result_json,
    ahead = CASE WHEN ahead = 2 THEN 2 ELSE 0 END,
    lease_owner = NULL, lease_expires_at = NULL, updated_at = :now
FROM {@decisions} AS f
WHERE tickq_jobs.id = f.job_id AND tickq_jobs.attempts = f.attempt
  AND tickq_jobs.status = 'running' AND tickq_jobs.lease_owner = :owner

-- name: releases
-- (A fragment.) The jobs of :releases, JSON [[job_id, attempt, ran, error_text], ...]: ran
-- when the run had started (it is cut short), with the error its history row says.
(SELECT json_extract(value, '$[0]') AS job_id, json_extract(value, '$[1]') AS attempt,
        json_extract(value, '$[2]') AS ran, json_extract(value, '$[3]') AS error_text
 FROM json_each(:releases))

-- name: add_released_attempts
-- Runs just before release, in its transaction: a run cut short (it had started) keeps a
-- history row, numbered minus the attempt it gives back (as a refund is) and told apart
-- from a refund and from earlier releases of that number by a negative snooze.
INSERT INTO tickq_attempts (job_id, attempt, snooze, started_at, finished_at, outcome, error)
SELECT id, -attempts,
       -1 - (SELECT count(*) FROM tickq_attempts p
             WHERE p.job_id = tickq_jobs.id AND p.attempt = -tickq_jobs.attempts
               AND p.snooze < 0),
       attempted_at, :now, 'released', f.error_text
FROM tickq_jobs JOIN {@releases} AS f ON tickq_jobs.id = f.job_id
WHERE f.ran AND tickq_jobs.attempts = f.attempt AND tickq_jobs.status = 'running'
  AND tickq_jobs.lease_owner = :owner AND tickq_jobs.cancel_requested_at IS NULL
ON CONFLICT DO NOTHING

-- name: release
UPDATE tickq_jobs
SET status = 'pending', attempts = attempts - 1, lease_owner = NULL,
    ahead = CASE WHEN ahead = 2 THEN 2 ELSE 0 END,
    lease_expires_at = NULL, updated_at = :now
FROM {@releases} AS f
WHERE tickq_jobs.id = f.job_id AND tickq_jobs.attempts = f.attempt
  AND tickq_jobs.status = 'running' AND tickq_jobs.lease_owner = :owner
  AND tickq_jobs.cancel_requested_at IS NULL
RETURNING tickq_jobs.id

-- name: extend_leases
-- Also confirms the start of the :started ones (a renewal is the next round trip of a
-- process running a long job). The second column says the job was asked to stop.
UPDATE tickq_jobs SET lease_expires_at = :lease_until,
    lease_clock = :lease_clock, lease_mono = :lease_mono,
    ahead = CASE WHEN ahead = 1 AND id IN (SELECT value FROM json_each(:started)) THEN 0
                 ELSE ahead END
WHERE status = 'running' AND lease_owner = :owner
  AND id IN (SELECT value FROM json_each(:ids))
RETURNING id, cancel_requested_at IS NOT NULL

-- name: cancel_requests
-- Which of the owner's running jobs were asked to stop: a read, between lease renewals.
SELECT id FROM tickq_jobs
WHERE id IN (SELECT value FROM json_each(:ids)) AND status = 'running'
  AND lease_owner = :owner AND cancel_requested_at IS NOT NULL

-- name: lease_ran_out
-- (A fragment.) A running job's lease has run out: on the monotonic clock it was measured
-- on when the rescuer reads the same one (:clock, :mono), else by the wall clock. So a
-- wall-clock step, or another process's clock running ahead, rescues no live job.
(CASE WHEN lease_clock = :clock || ' ' || lease_expires_at THEN lease_mono < :mono
      ELSE lease_expires_at < :now END)

-- name: any_expired
SELECT 1 FROM tickq_jobs WHERE status = 'running' AND {@lease_ran_out} LIMIT 1

-- name: add_refunded_attempts
-- Runs first in a rescue's transaction: the history keeps each refund as a row of its own,
-- numbered minus the attempt it gave back (that number is used again by the next run).
INSERT INTO tickq_attempts (job_id, attempt, started_at, finished_at, outcome, error)
SELECT id, -attempts, attempted_at, :now, 'refunded', {refund_error}
FROM tickq_jobs WHERE status = 'running' AND ahead = 1 AND {@lease_ran_out}
  AND cancel_requested_at IS NULL
ON CONFLICT DO NOTHING

-- name: refund_expired
-- A claimed job whose start was never confirmed goes back with its attempt refunded,
-- marked 2 (refunded at most once).
UPDATE tickq_jobs
SET status = 'pending', attempts = attempts - 1, ahead = 2, run_after = :now,
    lease_owner = NULL, lease_expires_at = NULL, updated_at = :now
WHERE status = 'running' AND ahead = 1 AND {@lease_ran_out}
  AND cancel_requested_at IS NULL
RETURNING {job_columns}

-- name: add_expired_attempts
-- A job asked to stop (cancel_requested_at) counts as cancelled, not as a lost attempt.
INSERT INTO tickq_attempts (job_id, attempt, started_at, finished_at, outcome, error)
SELECT id, attempts, attempted_at, :now,
       CASE WHEN cancel_requested_at IS NULL THEN 'lease_expired' ELSE 'cancelled' END,
       {expired_error}
FROM tickq_jobs WHERE status = 'running' AND {@lease_ran_out}
ON CONFLICT DO NOTHING

-- name: rescue_expired
-- {rescued_status}: pending, or failed when out of attempts (job.STATE_MACHINE's rule);
-- cancelled when the job was asked to stop.
UPDATE tickq_jobs
SET status = {rescued_status},
    finished_at = CASE WHEN {out_of_attempts} OR cancel_requested_at IS NOT NULL THEN :now END,
    last_error = {expired_error},
    run_after = :now, lease_owner = NULL, lease_expires_at = NULL, updated_at = :now
WHERE status = 'running' AND {@lease_ran_out}
RETURNING {job_columns}

-- name: list
SELECT {job_columns} FROM tickq_jobs
WHERE (:status IS NULL OR status = :status)
  AND (:type IS NULL OR type = :type)
  AND (:queue IS NULL OR queue = :queue)
  AND (:before_id IS NULL OR id < :before_id)
ORDER BY id DESC LIMIT :limit

-- name: retry
-- A retry by hand gives the job one more attempt and a new max_snooze.
UPDATE tickq_jobs
SET status = 'pending', run_after = :now, finished_at = NULL, updated_at = :now,
    max_attempts = MAX(max_attempts, attempts + 1), snoozed_since = NULL,
    cancel_requested_at = NULL
WHERE id = :id AND status IN ('failed', 'cancelled')
RETURNING {job_columns}

-- name: cancel
-- A pending job is cancelled at once; a running one is asked to stop (its worker sees
-- cancel_requested_at and ends it cancelled). Asking again changes nothing.
UPDATE tickq_jobs
SET status = CASE WHEN status = 'pending' THEN 'cancelled' ELSE status END,
    finished_at = CASE WHEN status = 'pending' THEN :now ELSE finished_at END,
    cancel_requested_at = CASE WHEN status = 'running'
                               THEN COALESCE(cancel_requested_at, :now) END,
    updated_at = :now
WHERE id = :id AND status IN ('pending', 'running')
RETURNING {job_columns}

-- name: prunable
SELECT id FROM tickq_jobs
WHERE finished_at < :cutoff AND status IN ('done', 'failed', 'cancelled')
LIMIT :batch

-- name: prune_attempts
DELETE FROM tickq_attempts WHERE job_id IN (SELECT value FROM json_each(:ids))

-- name: prune
DELETE FROM tickq_jobs WHERE id IN (SELECT value FROM json_each(:ids))

-- name: counts
-- Jobs by queue, status and type without reading the history: open jobs through their
-- partial indexes (claim, lease, stopped), done jobs from the counters (done_counts).
-- The running jobs are read through the lease index by name: with none running, ANALYZE
-- leaves it no statistics and the planner would walk a whole index to group by queue.
SELECT queue, status, type, count(*) FROM tickq_jobs WHERE status = 'pending'
GROUP BY queue, status, type
UNION ALL
SELECT queue, status, type, count(*) FROM tickq_jobs INDEXED BY tickq_jobs_lease
WHERE status = 'running'
GROUP BY queue, status, type
UNION ALL
SELECT queue, status, type, count(*) FROM tickq_jobs WHERE status IN ('failed', 'cancelled')
GROUP BY queue, status, type
UNION ALL
{@done_counts}

-- name: due_summary
SELECT count(*), min(run_after) FROM tickq_jobs WHERE status = 'pending' AND run_after <= :now

-- name: queue_gauges
-- Per queue with pending or running jobs: how many are due now, how many are running.
SELECT queue, sum(status = 'pending' AND run_after <= :now), sum(status = 'running')
FROM tickq_jobs WHERE status IN ('pending', 'running') GROUP BY queue

-- name: due_in
-- When the next pending job comes due, and "now", for a worker deciding how long to sleep.
-- Paused queues' jobs never come due. Limited types' jobs come due in the third column's
-- seconds: 0 when one of them may start now; when a rate window is full, when its first
-- start leaves it; NULL when only a running job's end frees a slot (the worker then polls).
-- A keyed type's (whose keys are not counted here, one by one): when its window's oldest
-- start, of any key, leaves it; NULL without a rate limit.
SELECT min(run_after), :now, (
    SELECT min(CASE
        WHEN l.keyed
            THEN (SELECT min(s.at) FROM tickq_starts s
                  WHERE s.type = l.type AND s.at > :epoch - l.per) + l.per - :epoch
        WHEN l.rate IS NOT NULL AND (SELECT count(*) FROM tickq_starts s
                 WHERE s.type = l.type AND s.at > :epoch - l.per) >= l.rate
            THEN (SELECT min(s.at) FROM tickq_starts s
                  WHERE s.type = l.type AND s.at > :epoch - l.per) + l.per - :epoch
        WHEN l.concurrency IS NOT NULL AND (SELECT count(*) FROM tickq_jobs r
                 WHERE r.status = 'running' AND r.type = l.type AND r.lease_expires_at > :now)
                 >= l.concurrency
            THEN NULL
        ELSE 0 END)
    FROM tickq_limits l
    WHERE EXISTS (SELECT 1 FROM tickq_jobs j
                  WHERE j.status = 'pending' AND j.type = l.type AND j.run_after <= :now
                    AND (:queues IS NULL OR j.queue IN (SELECT value FROM json_each(:queues)))
                    AND NOT EXISTS (SELECT 1 FROM tickq_paused p WHERE p.queue = j.queue))) FROM tickq_jobs
WHERE status = 'pending'
  AND (:queues IS NULL OR queue IN (SELECT value FROM json_each(:queues)))
  AND NOT EXISTS (SELECT 1 FROM tickq_paused p WHERE p.queue = tickq_jobs.queue)
  AND NOT EXISTS (SELECT 1 FROM tickq_limits l WHERE l.type = tickq_jobs.type
                  AND (NOT l.keyed OR tickq_jobs.concurrency_key IS NOT NULL))

-- name: pause
INSERT INTO tickq_paused (queue, paused_at) VALUES (:queue, :now)
ON CONFLICT (queue) DO NOTHING
RETURNING queue

-- name: resume
DELETE FROM tickq_paused WHERE queue = :queue RETURNING queue

-- name: declare_limit
INSERT INTO tickq_limits (type, concurrency, rate, per, keyed, updated_at)
VALUES (:type, :concurrency, :rate, :per, :keyed, :now)
ON CONFLICT (type) DO UPDATE
SET concurrency = excluded.concurrency, rate = excluded.rate, per = excluded.per,
    keyed = excluded.keyed, updated_at = excluded.updated_at

-- name: forget_limits
-- Types this process registers without limits (:types, JSON) are no longer limited.
DELETE FROM tickq_limits WHERE type IN (SELECT value FROM json_each(:types))

-- Schedules and ticks (migration 2) ----------------------------------------------------

-- name: record_tick
INSERT INTO tickq_ticks (id, last_tick_at, ticks) VALUES (1, :now, 1)
ON CONFLICT (id) DO UPDATE
SET last_tick_at = MAX(last_tick_at, excluded.last_tick_at), ticks = ticks + 1

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
    WHERE j.status = 'pending' AND j.run_after <= :now
      AND NOT EXISTS (SELECT 1 FROM tickq_paused p WHERE p.queue = j.queue)
    LIMIT 1000) AS due)

-- name: tick_state
-- Everything a tick needs to know before it starts: the time, the backlog of pending jobs
-- (how many are due, when the earliest comes due) and each schedule's cursor. A running job counts as coming due
-- when its lease runs out (if its worker died, it is rescued then).
SELECT 'now', NULL, :now, NULL
UNION ALL
SELECT 'backlog', NULL, (SELECT min(t) FROM (SELECT {@earliest_unpaused} AS t
       UNION ALL SELECT min(lease_expires_at) FROM tickq_jobs WHERE status = 'running') AS m), {@due_count}
UNION ALL
SELECT 'schedule', name, handled_until, NULL FROM tickq_schedules

-- name: tick_backlog
SELECT {@due_count},
       (SELECT min(t) FROM (SELECT {@earliest_unpaused} AS t
       UNION ALL SELECT min(lease_expires_at) FROM tickq_jobs WHERE status = 'running') AS m), :now

-- name: advance_schedule
-- Moves the schedule's cursor only from the value the tick read (or creates it when the
-- tick saw none); the slot jobs are inserted, in the same transaction, only if it moved.
INSERT INTO tickq_schedules (name, handled_until, last_slot, updated_at)
VALUES (:name, :handled_until, :last_slot, :now)
ON CONFLICT (name) DO UPDATE
SET handled_until = excluded.handled_until,
    last_slot = COALESCE(excluded.last_slot, tickq_schedules.last_slot),
    updated_at = excluded.updated_at
WHERE tickq_schedules.handled_until = :expected
RETURNING name

-- name: note_clock
-- What this process's wall clock reads (:offset: wall minus monotonic seconds), seen now
-- on the shared monotonic clock :clock.
INSERT INTO tickq_clocks (owner, domain, offset, seen, seen_at)
VALUES (:owner, :clock, :offset, :mono, :now)
ON CONFLICT (owner) DO UPDATE
SET domain = excluded.domain, offset = excluded.offset, seen = excluded.seen,
    seen_at = excluded.seen_at

-- name: forget_clocks
DELETE FROM tickq_clocks
WHERE (domain = :clock AND seen < :mono - :window)
   OR (domain <> :clock AND seen_at < :forget_before)

-- name: live_clocks
SELECT offset FROM tickq_clocks WHERE domain = :clock AND seen >= :mono - :window

-- name: last_tick
SELECT (SELECT last_tick_at FROM tickq_ticks WHERE id = 1),
       (SELECT ticks FROM tickq_ticks WHERE id = 1), :now

-- name: count_failed
SELECT count(*) FROM tickq_jobs WHERE status = 'failed' AND (:type IS NULL OR type = :type)

-- name: retry_failed
-- One batch of failed jobs back to pending. A job whose unique_key another active job
-- holds is skipped, and of several failed jobs sharing a key only the newest is retried.
UPDATE tickq_jobs
SET status = 'pending', run_after = :now, finished_at = NULL, updated_at = :now,
    max_attempts = MAX(max_attempts, attempts + 1), snoozed_since = NULL
WHERE id IN (
    SELECT f.id FROM tickq_jobs f
    WHERE f.status = 'failed' AND (:type IS NULL OR f.type = :type)
      AND (f.unique_key IS NULL OR (
          NOT EXISTS (SELECT 1 FROM tickq_jobs o WHERE o.unique_key = f.unique_key
                      AND o.status IN ('pending', 'running'))
          AND f.id = (SELECT max(g.id) FROM tickq_jobs g
                      WHERE g.unique_key = f.unique_key AND g.status = 'failed')))
    ORDER BY f.id LIMIT :batch)
RETURNING id

-- Migration bookkeeping (store/migrate.py) ----------------------------------------------

-- name: migrations_table
CREATE TABLE IF NOT EXISTS tickq_migrations (version INTEGER PRIMARY KEY,
    name TEXT NOT NULL, applied_at TEXT NOT NULL)

-- name: migrations_record
INSERT INTO tickq_migrations (version, name, applied_at) VALUES (:version, :name, :now)

-- name: lease_expiry
-- When the first lease of a running job runs out, and "now": an idle worker sleeps until
-- then (a rescue may be due) instead of looking every few seconds.
SELECT min(lease_expires_at), :now FROM tickq_jobs WHERE status = 'running'
