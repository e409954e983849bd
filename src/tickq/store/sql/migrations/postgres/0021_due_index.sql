-- tickq schema 21: pending jobs by due time alone, so a tick's backlog read (the earliest
-- due time, how many are due now) walks only the due rows: jobs due in the future, however
-- many, cost it nothing (the claim index leads with priority, so it could not).
CREATE INDEX tickq_jobs_due ON tickq_jobs (run_after) WHERE status = 'pending';
