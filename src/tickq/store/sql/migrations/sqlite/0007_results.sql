-- tickq schema 7 (SQLite): a job function's JSON-serialisable return value, stored when the
-- job succeeds (NULL when it returned None or has not succeeded); pruned with its job.
ALTER TABLE tickq_jobs ADD COLUMN result TEXT;
