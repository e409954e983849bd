-- tickq schema 24: figures kept as jobs move, so reading them costs the same at a million
-- rows as at ten. tickq_totals now holds every finished attempt (not only pruned ones):
-- triggers add each attempt row and each job that becomes done, in the transaction that
-- writes it; pruning no longer adds anything. Rows are split in 8 shards by backend, so
-- workers finishing jobs of one type at once seldom wait on one row's lock.
-- tickq_pruned counts the done jobs deleted: jobs done now = done totals - pruned.
-- No job moves while the counters are filled in: writers wait here (about a second per
-- million rows), so none is counted twice or missed by the triggers made below.
LOCK TABLE tickq_jobs, tickq_attempts IN SHARE ROW EXCLUSIVE MODE;

CREATE FUNCTION tickq_duration_bucket(seconds double precision) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN (CASE WHEN seconds IS NULL THEN '0.005' WHEN seconds <= 0.005 THEN '0.005' WHEN seconds <= 0.01 THEN '0.01' WHEN seconds <= 0.025 THEN '0.025' WHEN seconds <= 0.05 THEN '0.05'
    WHEN seconds <= 0.1 THEN '0.1' WHEN seconds <= 0.25 THEN '0.25' WHEN seconds <= 0.5 THEN '0.5' WHEN seconds <= 1 THEN '1.0'
    WHEN seconds <= 2.5 THEN '2.5' WHEN seconds <= 5 THEN '5.0' WHEN seconds <= 10 THEN '10.0' WHEN seconds <= 30 THEN '30.0'
    WHEN seconds <= 60 THEN '60.0' WHEN seconds <= 120 THEN '120.0' WHEN seconds <= 300 THEN '300.0' WHEN seconds <= 600 THEN '600.0'
    WHEN seconds <= 1800 THEN '1800.0' WHEN seconds <= 3600 THEN '3600.0' ELSE '+Inf' END);

ALTER TABLE tickq_totals ADD COLUMN shard SMALLINT NOT NULL DEFAULT 0;
ALTER TABLE tickq_totals DROP CONSTRAINT tickq_totals_pkey;
ALTER TABLE tickq_totals ADD PRIMARY KEY (queue, type, outcome, le, shard);

CREATE TABLE tickq_pruned (
    queue TEXT     NOT NULL,
    type  TEXT     NOT NULL,
    shard SMALLINT NOT NULL DEFAULT 0,
    jobs  BIGINT   NOT NULL DEFAULT 0,
    PRIMARY KEY (queue, type, shard)
);

-- What pruning rolled up so far is exactly the done jobs it deleted (one 'done' each).
INSERT INTO tickq_pruned (queue, type, jobs)
SELECT queue, type, sum(attempts) FROM tickq_totals WHERE outcome = 'done'
GROUP BY queue, type;

-- The live rows join the totals once, here; from now on the triggers add them.
INSERT INTO tickq_totals AS t (queue, type, outcome, le, attempts, seconds)
SELECT queue, type, outcome, tickq_duration_bucket(seconds), count(*), sum(COALESCE(seconds, 0))
FROM (
    SELECT queue, type, 'done' AS outcome,
           COALESCE(duration,
                    CAST(EXTRACT(EPOCH FROM finished_at - attempted_at) AS float8)) AS seconds
    FROM tickq_jobs WHERE status = 'done'
    UNION ALL
    SELECT j.queue, j.type, a.outcome,
           COALESCE(a.duration, CAST(EXTRACT(EPOCH FROM a.finished_at - a.started_at) AS float8))
    FROM tickq_attempts a JOIN tickq_jobs j ON j.id = a.job_id) AS d
GROUP BY 1, 2, 3, 4
ON CONFLICT (queue, type, outcome, le, shard) DO UPDATE
SET attempts = t.attempts + excluded.attempts, seconds = t.seconds + excluded.seconds;

-- An attempt row (row by row: a finish that succeeds inserts none and pays nothing here).
CREATE FUNCTION tickq_count_attempts() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    took double precision := COALESCE(NEW.duration,
        CAST(EXTRACT(EPOCH FROM NEW.finished_at - NEW.started_at) AS float8));
BEGIN
    INSERT INTO tickq_totals AS t (queue, type, outcome, le, shard, attempts, seconds)
    SELECT j.queue, j.type, NEW.outcome, tickq_duration_bucket(took), pg_backend_pid() % 8,
           1, COALESCE(took, 0)
    FROM tickq_jobs j WHERE j.id = NEW.job_id
    ON CONFLICT (queue, type, outcome, le, shard) DO UPDATE
    SET attempts = t.attempts + 1, seconds = t.seconds + excluded.seconds;
    RETURN NULL;
END
$$;
CREATE TRIGGER tickq_count_attempts AFTER INSERT ON tickq_attempts
FOR EACH ROW EXECUTE FUNCTION tickq_count_attempts();

-- A job that became done (a job never leaves done but to be deleted).
CREATE FUNCTION tickq_count_done() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    took double precision := COALESCE(NEW.duration,
        CAST(EXTRACT(EPOCH FROM NEW.finished_at - NEW.attempted_at) AS float8));
BEGIN
    INSERT INTO tickq_totals AS t (queue, type, outcome, le, shard, attempts, seconds)
    VALUES (NEW.queue, NEW.type, 'done', tickq_duration_bucket(took), pg_backend_pid() % 8,
            1, COALESCE(took, 0))
    ON CONFLICT (queue, type, outcome, le, shard) DO UPDATE
    SET attempts = t.attempts + 1, seconds = t.seconds + excluded.seconds;
    RETURN NULL;
END
$$;
CREATE TRIGGER tickq_count_done AFTER UPDATE OF status ON tickq_jobs
FOR EACH ROW WHEN (NEW.status = 'done' AND OLD.status <> 'done')
EXECUTE FUNCTION tickq_count_done();

-- Done jobs deleted (pruned, or deleted by hand), counted per statement.
CREATE FUNCTION tickq_count_pruned() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO tickq_pruned AS p (queue, type, shard, jobs)
    SELECT queue, type, pg_backend_pid() % 8, count(*) FROM tickq_jobs_deleted
    WHERE status = 'done' GROUP BY 1, 2
    ON CONFLICT (queue, type, shard) DO UPDATE SET jobs = p.jobs + excluded.jobs;
    RETURN NULL;
END
$$;
CREATE TRIGGER tickq_count_pruned AFTER DELETE ON tickq_jobs
REFERENCING OLD TABLE AS tickq_jobs_deleted
FOR EACH STATEMENT EXECUTE FUNCTION tickq_count_pruned();
