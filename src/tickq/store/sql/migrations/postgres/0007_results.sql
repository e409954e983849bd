-- tickq schema 7 (PostgreSQL): a job function's JSON-serialisable return value, stored when
-- the job succeeds (NULL when it returned None or has not succeeded); pruned with its job.
-- `json`, like payloads: the text exactly as the function's value was encoded.
ALTER TABLE tickq_jobs ADD COLUMN result json;
