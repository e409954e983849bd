-- tickq schema 25: what stats() and the dashboard read, from small indexes. Jobs of one
-- queue, newest first: the queue filter reads one page of index entries instead of
-- walking every job newest first until a page matched (a queue with few or no jobs among
-- a million made that a scan of the table).
CREATE INDEX tickq_jobs_queue ON tickq_jobs (queue, id);
-- Pending jobs by queue and type: counted from the index alone, in order (status is in it
-- so SQLite's planner sees it covers the query).
CREATE INDEX tickq_jobs_pending ON tickq_jobs (queue, type, status) WHERE status = 'pending';
