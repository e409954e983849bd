-- tickq schema 5 (SQLite): indexes for the dashboard's pages.
-- Counts of open jobs by status, queue and type, read from the index alone; done jobs (the
-- bulk of a big table) are left out, so the index stays small and completing costs nothing.
CREATE INDEX tickq_jobs_open ON tickq_jobs (status, queue, type, id)
    WHERE status IN ('pending', 'running', 'failed', 'cancelled');
-- Jobs of one type, newest first (keyset pages), and the recent alert deliveries.
CREATE INDEX tickq_jobs_type ON tickq_jobs (type, id);
-- Search by unique key, whatever the job's status or scope.
CREATE INDEX tickq_jobs_unique_key ON tickq_jobs (unique_key) WHERE unique_key IS NOT NULL;
-- The hourly chart counts jobs done per hour from the index alone: the finished-jobs index
-- (prune's) gains the status column.
DROP INDEX tickq_jobs_finished;
CREATE INDEX tickq_jobs_finished ON tickq_jobs (finished_at, status) WHERE finished_at IS NOT NULL;
