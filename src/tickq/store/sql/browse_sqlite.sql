-- Named queries for people browsing jobs (the dashboard), SQLite. Pages of jobs are built
-- in tickq.store.browse from the filters given; these are the fixed reads.

-- name: browse_active_counts
-- Pending and running jobs by status, queue and type, through the due and lease indexes
-- (the lease index by name: see counts).
SELECT status, queue, type, count(*) FROM tickq_jobs WHERE status = 'pending'
GROUP BY status, queue, type
UNION ALL
SELECT status, queue, type, count(*) FROM tickq_jobs INDEXED BY tickq_jobs_lease
WHERE status = 'running'
GROUP BY status, queue, type

-- name: browse_stopped_counts
-- Failed and cancelled jobs by status, queue and type, from tickq_jobs_stopped alone.
SELECT status, queue, type, count(*) FROM tickq_jobs WHERE status IN ('failed', 'cancelled')
GROUP BY status, queue, type

-- name: browse_hourly
-- Jobs done and attempts failed per hour (UTC) since :since; times are UTC ISO text.
SELECT 'done', substr(finished_at, 1, 13), count(*) FROM tickq_jobs
WHERE finished_at >= :since AND status = 'done'
GROUP BY 2
UNION ALL
SELECT 'failed', substr(finished_at, 1, 13), count(*) FROM tickq_attempts
WHERE finished_at >= :since AND outcome IN ('error', 'lease_expired')
GROUP BY 2

-- name: browse_failing_types
-- Job types with failed attempts since :since, most first, and the job that failed last.
SELECT t.type, t.attempts, t.jobs, t.last_at,
       (SELECT a2.job_id FROM tickq_attempts a2 JOIN tickq_jobs j2 ON j2.id = a2.job_id
        WHERE j2.type = t.type AND a2.finished_at = t.last_at
          AND a2.outcome IN ('error', 'lease_expired') LIMIT 1)
FROM (
    SELECT j.type AS type, count(*) AS attempts, count(DISTINCT a.job_id) AS jobs,
           max(a.finished_at) AS last_at
    FROM tickq_attempts a JOIN tickq_jobs j ON j.id = a.job_id
    WHERE a.finished_at >= :since AND a.outcome IN ('error', 'lease_expired')
    GROUP BY j.type) AS t
ORDER BY 2 DESC, 1 LIMIT :limit

-- name: browse_last_errors
SELECT id, substr(last_error, 1, 300) FROM tickq_jobs
WHERE id IN (SELECT value FROM json_each(:ids))

-- name: browse_by_unique_key
SELECT {job_columns} FROM tickq_jobs WHERE unique_key = :key ORDER BY id DESC LIMIT :limit

-- name: browse_finished
-- The job the dashboard deletes, if it is finished (SQLiteStore._retire does the rest, as
-- for prune: attempts and job deleted, in one transaction).
SELECT id FROM tickq_jobs WHERE id = :id AND status IN ('done', 'failed', 'cancelled')
