-- Named queries for people browsing jobs (the dashboard), PostgreSQL. Pages of jobs are
-- built in tickq.store.browse from the filters given; these are the fixed reads.

-- name: browse_active_counts
-- Pending and running jobs by status, queue and type, through the claim and lease indexes.
SELECT status, queue, type, count(*) FROM tickq_jobs WHERE status = 'pending'
GROUP BY status, queue, type
UNION ALL
SELECT status, queue, type, count(*) FROM tickq_jobs WHERE status = 'running'
GROUP BY status, queue, type

-- name: browse_stopped_counts
-- Failed and cancelled jobs by status, queue and type, from tickq_jobs_stopped alone.
SELECT status, queue, type, count(*) FROM tickq_jobs WHERE status IN ('failed', 'cancelled')
GROUP BY status, queue, type

-- name: browse_hourly
-- Jobs done and attempts failed per hour (UTC) since :since.
-- date_bin costs half of date_trunc(..., 'UTC') per row.
SELECT 'done', date_bin('1 hour', finished_at, TIMESTAMPTZ '2000-01-01 00:00Z'), count(*)
FROM tickq_jobs
WHERE finished_at >= :since AND status = 'done'
GROUP BY 2
UNION ALL
SELECT 'failed', date_bin('1 hour', finished_at, TIMESTAMPTZ '2000-01-01 00:00Z'), count(*)
FROM tickq_attempts
WHERE finished_at >= :since AND outcome IN ('error', 'lease_expired')
GROUP BY 2

-- name: browse_failing_types
-- Job types with failed attempts since :since, most first, and the job that failed last.
SELECT j.type, count(*), count(DISTINCT a.job_id), max(a.finished_at),
       (array_agg(a.job_id ORDER BY a.finished_at DESC))[1]
FROM tickq_attempts a JOIN tickq_jobs j ON j.id = a.job_id
WHERE a.finished_at >= :since AND a.outcome IN ('error', 'lease_expired')
GROUP BY j.type ORDER BY 2 DESC, 1 LIMIT :limit

-- name: browse_last_errors
SELECT id, substr(last_error, 1, 300) FROM tickq_jobs WHERE id = ANY(CAST(:ids AS bigint[]))

-- name: browse_by_unique_key
SELECT {job_columns} FROM tickq_jobs WHERE unique_key = :key ORDER BY id DESC LIMIT :limit

-- name: browse_delete
-- A finished job and its attempts go; what they counted stays in tickq_totals, as for
-- prune, so processed totals never go down.
WITH doomed AS (
    SELECT id FROM tickq_jobs
    WHERE id = :id AND status IN ('done', 'failed', 'cancelled')
    FOR UPDATE),
{@retire_doomed}
