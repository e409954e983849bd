-- Named queries the same in every dialect (loaded before sql/<dialect>.sql, which may not
-- repeat a name). The others differ for reasons of dialect, not taste: Postgres takes
-- "now" from the database clock (COALESCE(CAST(:now AS timestamptz), now())) and casts
-- NULL parameters; it passes lists as arrays where SQLite reads JSON (json_each); and it
-- writes a finish and its attempt row in one statement (a CTE) where SQLite runs two.

-- name: paused
SELECT queue FROM tickq_paused ORDER BY queue

-- name: limits
SELECT type, concurrency, rate, per, keyed FROM tickq_limits ORDER BY type

-- name: find_unique
SELECT id FROM tickq_jobs
WHERE unique_key = :unique_key
  AND (status IN ('pending', 'running') OR (:unique_scope = 'all' AND unique_scope = 'all'))
ORDER BY id DESC LIMIT 1

-- name: get
SELECT {job_columns} FROM tickq_jobs WHERE id = :id

-- name: attempts
-- Failed and interrupted attempts are rows; the successful (or running) one is the job row.
-- Snoozed and refunded runs are rows too, numbered like the attempt that follows them (a
-- refund is stored as -N): they come first, in the order they were claimed.
SELECT job_id, abs(attempt), started_at, finished_at, outcome, error, duration FROM (
    SELECT job_id, attempt, started_at, finished_at, outcome, error, duration,
           CASE WHEN outcome = 'snoozed' THEN snooze WHEN attempt < 0 THEN 2147483646
                ELSE 2147483647 END AS k
    FROM tickq_attempts WHERE job_id = :id
    UNION ALL
    SELECT id, attempts, attempted_at, CASE WHEN status = 'done' THEN finished_at END, status,
           NULL, CASE WHEN status = 'done' THEN duration END, 2147483647
    FROM tickq_jobs WHERE id = :id AND status IN ('done', 'running') AND attempts > 0) AS h
ORDER BY abs(attempt), started_at, k

-- name: totals
-- Every finished attempt by (queue, type, outcome, duration bucket), pruned ones too:
-- kept by triggers as attempts end (migration 24); on Postgres in shards, summed by the
-- reader.
SELECT queue, type, outcome, le, attempts, seconds FROM tickq_totals

-- name: next_due
SELECT min(run_after) FROM tickq_jobs WHERE status = 'pending'

-- name: failed_since
SELECT count(*) FROM tickq_jobs WHERE status = 'failed' AND finished_at >= :since

-- name: schedule_states
SELECT name, handled_until, last_slot, updated_at FROM tickq_schedules ORDER BY name

-- name: failed_attempts_since
SELECT count(*) FROM tickq_attempts WHERE outcome IN ('error', 'lease_expired')
  AND finished_at >= :since

-- name: failed_in_window
SELECT count(*) FROM tickq_jobs
WHERE type = :type AND status = 'failed' AND finished_at >= :start AND finished_at < :end

-- name: failed_sample_in_window
SELECT id, substr(last_error, 1, 4000) FROM tickq_jobs
WHERE type = :type AND status = 'failed' AND finished_at >= :start AND finished_at < :end
ORDER BY finished_at DESC, id DESC LIMIT :limit

-- name: failed_attempts_in_window
-- Retry(delay) raised on purpose (e.g. polling) is not a failure worth an alert.
SELECT count(*) FROM tickq_attempts a JOIN tickq_jobs j ON j.id = a.job_id
WHERE j.type = :type AND a.outcome IN ('error', 'lease_expired')
  AND a.finished_at >= :start AND a.finished_at < :end
  AND (a.error IS NULL OR a.error NOT LIKE 'Retry:%')

-- name: failed_attempts_sample_in_window
SELECT a.job_id, substr(a.error, 1, 4000) FROM tickq_attempts a
JOIN tickq_jobs j ON j.id = a.job_id
WHERE j.type = :type AND a.outcome IN ('error', 'lease_expired')
  AND a.finished_at >= :start AND a.finished_at < :end
  AND (a.error IS NULL OR a.error NOT LIKE 'Retry:%')
ORDER BY a.finished_at DESC LIMIT :limit

-- name: migrations_applied
SELECT version FROM tickq_migrations

-- name: created_at
-- When a job was stored, read on the caller's connection (the row may not be committed yet).
SELECT created_at FROM tickq_jobs WHERE id = :id

-- The dashboard's logins (migration 12): times are the dashboard clock's epoch seconds.

-- name: dashboard_key_add
INSERT INTO tickq_dashboard_keys (name, value, created_at) VALUES (:name, :value, :now)
ON CONFLICT (name) DO NOTHING

-- name: dashboard_key
SELECT value FROM tickq_dashboard_keys WHERE name = :name

-- name: dashboard_sessions_expired
DELETE FROM tickq_dashboard_sessions WHERE expires_at <= :now

-- name: dashboard_session_open
INSERT INTO tickq_dashboard_sessions (id, password_tag, created_at, expires_at)
VALUES (:id, :tag, :now, :expires)

-- name: dashboard_session_alive
SELECT 1 FROM tickq_dashboard_sessions
WHERE id = :id AND password_tag = :tag AND expires_at > :now

-- name: dashboard_session_close
DELETE FROM tickq_dashboard_sessions WHERE id = :id

-- name: dashboard_sessions_close
DELETE FROM tickq_dashboard_sessions RETURNING 1

-- name: dashboard_logins_old
DELETE FROM tickq_dashboard_logins WHERE at <= :since

-- name: dashboard_login_start
INSERT INTO tickq_dashboard_logins (id, client, at) VALUES (:id, :client, :now)

-- name: dashboard_login_counts
-- This client's attempts in the window, the oldest of them, and those of every client
-- not known by a device cookie (those are counted as 'device:' and the device's id).
SELECT count(*), min(at),
       (SELECT count(*) FROM tickq_dashboard_logins
        WHERE at > :since AND client NOT LIKE 'device:%')
FROM tickq_dashboard_logins WHERE client = :client AND at > :since

-- name: dashboard_login_forget
DELETE FROM tickq_dashboard_logins WHERE id = :id

-- name: dashboard_login_clear
DELETE FROM tickq_dashboard_logins WHERE client = :client

-- name: forget_tokens
DELETE FROM tickq_tokens_seen WHERE expires_at < :now_epoch

-- name: remember_token
INSERT INTO tickq_tokens_seen (jti, expires_at) VALUES (:jti, :expires_at)
ON CONFLICT (jti) DO NOTHING
RETURNING jti

-- name: note_late
-- The history row of a run whose outcome arrived after the job had been rescued (its
-- lease ran out while the database could not be reached): it says so, not "crashed".
UPDATE tickq_attempts SET error = :note
WHERE job_id = :id AND attempt IN (:attempt, -:attempt)
  AND outcome IN ('lease_expired', 'refunded') AND started_at >= :started
RETURNING job_id

-- name: done_counts
-- (A fragment.) Done jobs by queue and type from the counters the triggers keep
-- (migration 24): every job that became done less those deleted.
SELECT queue, 'done' AS status, type, CAST(sum(n) AS bigint) AS n FROM (
    SELECT queue, type, attempts AS n FROM tickq_totals WHERE outcome = 'done'
    UNION ALL
    SELECT queue, type, -jobs FROM tickq_pruned) AS d
GROUP BY queue, type HAVING sum(n) <> 0

-- name: browse_count_done
-- Jobs done now, all queues and types (the dashboard's overview).
SELECT CAST(COALESCE(sum(n), 0) AS bigint) FROM ({@done_counts}) AS c
