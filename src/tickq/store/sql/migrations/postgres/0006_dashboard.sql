-- tickq schema 6 (PostgreSQL): indexes for the dashboard's pages.
-- Failed and cancelled jobs by queue and type, counted from the index alone. Only rows
-- that stopped are in it, so enqueue, claim and complete never write to it (an index of
-- every open job halved the worker's throughput); pending and running jobs are counted
-- through the claim and lease indexes.
CREATE INDEX tickq_jobs_stopped ON tickq_jobs (status, queue, type, id)
    WHERE status IN ('failed', 'cancelled');
-- Jobs of one type, newest first (keyset pages), and the recent alert deliveries.
CREATE INDEX tickq_jobs_type ON tickq_jobs (type, id);
-- Search by unique key, whatever the job's status or scope.
CREATE INDEX tickq_jobs_unique_key ON tickq_jobs (unique_key) WHERE unique_key IS NOT NULL;
-- The hourly chart counts jobs done per hour from the index alone: the finished-jobs index
-- (prune's) gains the status column.
DROP INDEX tickq_jobs_finished;
CREATE INDEX tickq_jobs_finished ON tickq_jobs (finished_at, status) WHERE finished_at IS NOT NULL;
