-- tickq schema 11 (PostgreSQL): jobs that wait without failing (raise Snooze(seconds)).
-- (Numbers 9 and 10 are taken by other changes; each is applied once, in order.)
-- snoozes: how many times the job snoozed (none of them is an attempt); snoozed_since:
-- when it first snoozed since it was enqueued or retried by hand (max_snooze runs from it).
-- Constant defaults: adding the columns rewrites no row.
ALTER TABLE tickq_jobs ADD COLUMN snoozes INTEGER NOT NULL DEFAULT 0,
                       ADD COLUMN snoozed_since TIMESTAMPTZ;

-- A snoozed run is kept in the history under the number of the attempt that follows it,
-- told apart by its snooze number (0 for every real attempt): the key gains that column.
-- Rebuilding the key reads the attempts table once, under its lock: recording a failed
-- attempt waits for it meanwhile (claims and successes don't touch the table).
ALTER TABLE tickq_attempts ADD COLUMN snooze INTEGER NOT NULL DEFAULT 0;
ALTER TABLE tickq_attempts DROP CONSTRAINT tickq_attempts_pkey,
                           ADD PRIMARY KEY (job_id, attempt, snooze);
