-- tickq schema 27 (PostgreSQL): jobs that become done are counted per statement, not per
-- row. A row trigger ran a function and an upsert of one counter row for each job a
-- finish moved to done (a worker's batch of 100: 100 of each), which cost a fifth of a
-- worker's throughput; a statement trigger adds one row per queue, type and duration
-- bucket of the batch. Transition tables can't go with a column list (UPDATE OF
-- status): it sees every UPDATE of tickq_jobs, and finds nothing to add in all but
-- the finishes.
DROP TRIGGER tickq_count_done ON tickq_jobs;
DROP FUNCTION tickq_count_done();

CREATE FUNCTION tickq_count_done() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO tickq_totals AS t (queue, type, outcome, le, shard, attempts, seconds)
    SELECT n.queue, n.type, 'done', tickq_duration_bucket(d.took), pg_backend_pid() % 8,
           count(*), COALESCE(sum(d.took), 0)
    FROM tickq_jobs_after n JOIN tickq_jobs_before o ON o.id = n.id,
         LATERAL (SELECT COALESCE(n.duration, CAST(EXTRACT(EPOCH FROM n.finished_at
                                                    - n.attempted_at) AS float8)) AS took) d
    WHERE n.status = 'done' AND o.status <> 'done'
    GROUP BY 1, 2, 4
    ON CONFLICT (queue, type, outcome, le, shard) DO UPDATE
    SET attempts = t.attempts + excluded.attempts, seconds = t.seconds + excluded.seconds;
    RETURN NULL;
END
$$;
CREATE TRIGGER tickq_count_done AFTER UPDATE ON tickq_jobs
REFERENCING OLD TABLE AS tickq_jobs_before NEW TABLE AS tickq_jobs_after
FOR EACH STATEMENT EXECUTE FUNCTION tickq_count_done();
