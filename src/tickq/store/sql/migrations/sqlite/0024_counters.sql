-- tickq schema 24: figures kept as jobs move, so reading them costs the same at a million
-- rows as at ten. tickq_totals now holds every finished attempt (not only pruned ones):
-- triggers add each attempt row and each job that becomes done, in the transaction that
-- writes it; pruning no longer adds anything. tickq_pruned counts the done jobs deleted:
-- jobs done now = done totals - pruned.
CREATE TABLE tickq_pruned (
    queue TEXT    NOT NULL,
    type  TEXT    NOT NULL,
    jobs  INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (queue, type)
);

-- What pruning rolled up so far is exactly the done jobs it deleted (one 'done' each).
INSERT INTO tickq_pruned (queue, type, jobs)
SELECT queue, type, sum(attempts) FROM tickq_totals WHERE outcome = 'done'
GROUP BY queue, type;

-- The live rows join the totals once, here; from now on the triggers add them.
INSERT INTO tickq_totals (queue, type, outcome, le, attempts, seconds)
SELECT queue, type, outcome, (CASE WHEN seconds IS NULL THEN '0.005' WHEN seconds <= 0.005 THEN '0.005' WHEN seconds <= 0.01 THEN '0.01' WHEN seconds <= 0.025 THEN '0.025' WHEN seconds <= 0.05 THEN '0.05'
        WHEN seconds <= 0.1 THEN '0.1' WHEN seconds <= 0.25 THEN '0.25' WHEN seconds <= 0.5 THEN '0.5' WHEN seconds <= 1 THEN '1.0'
        WHEN seconds <= 2.5 THEN '2.5' WHEN seconds <= 5 THEN '5.0' WHEN seconds <= 10 THEN '10.0' WHEN seconds <= 30 THEN '30.0'
        WHEN seconds <= 60 THEN '60.0' WHEN seconds <= 120 THEN '120.0' WHEN seconds <= 300 THEN '300.0' WHEN seconds <= 600 THEN '600.0'
        WHEN seconds <= 1800 THEN '1800.0' WHEN seconds <= 3600 THEN '3600.0' ELSE '+Inf' END),
       count(*), sum(COALESCE(seconds, 0))
FROM (
    SELECT queue, type, 'done' AS outcome,
           COALESCE(duration,
                    (julianday(finished_at) - julianday(attempted_at)) * 86400.0) AS seconds
    FROM tickq_jobs WHERE status = 'done'
    UNION ALL
    SELECT j.queue, j.type, a.outcome,
           COALESCE(a.duration, (julianday(a.finished_at) - julianday(a.started_at)) * 86400.0)
    FROM tickq_attempts a JOIN tickq_jobs j ON j.id = a.job_id)
WHERE true
GROUP BY 1, 2, 3, 4
ON CONFLICT (queue, type, outcome, le) DO UPDATE
SET attempts = tickq_totals.attempts + excluded.attempts,
    seconds = tickq_totals.seconds + excluded.seconds;

-- An attempt row.
CREATE TRIGGER tickq_count_attempts AFTER INSERT ON tickq_attempts
BEGIN
    INSERT INTO tickq_totals (queue, type, outcome, le, attempts, seconds)
    SELECT j.queue, j.type, NEW.outcome, (CASE WHEN seconds IS NULL THEN '0.005' WHEN seconds <= 0.005 THEN '0.005' WHEN seconds <= 0.01 THEN '0.01' WHEN seconds <= 0.025 THEN '0.025' WHEN seconds <= 0.05 THEN '0.05'
        WHEN seconds <= 0.1 THEN '0.1' WHEN seconds <= 0.25 THEN '0.25' WHEN seconds <= 0.5 THEN '0.5' WHEN seconds <= 1 THEN '1.0'
        WHEN seconds <= 2.5 THEN '2.5' WHEN seconds <= 5 THEN '5.0' WHEN seconds <= 10 THEN '10.0' WHEN seconds <= 30 THEN '30.0'
        WHEN seconds <= 60 THEN '60.0' WHEN seconds <= 120 THEN '120.0' WHEN seconds <= 300 THEN '300.0' WHEN seconds <= 600 THEN '600.0'
        WHEN seconds <= 1800 THEN '1800.0' WHEN seconds <= 3600 THEN '3600.0' ELSE '+Inf' END),
           1, COALESCE(seconds, 0)
    FROM tickq_jobs j, (SELECT COALESCE(NEW.duration,
        (julianday(NEW.finished_at) - julianday(NEW.started_at)) * 86400.0) AS seconds)
    WHERE j.id = NEW.job_id
    ON CONFLICT (queue, type, outcome, le) DO UPDATE
    SET attempts = tickq_totals.attempts + 1, seconds = tickq_totals.seconds + excluded.seconds;
END;

-- A job that became done (a job never leaves done but to be deleted).
CREATE TRIGGER tickq_count_done AFTER UPDATE OF status ON tickq_jobs
WHEN NEW.status = 'done' AND OLD.status <> 'done'
BEGIN
    INSERT INTO tickq_totals (queue, type, outcome, le, attempts, seconds)
    SELECT NEW.queue, NEW.type, 'done', (CASE WHEN seconds IS NULL THEN '0.005' WHEN seconds <= 0.005 THEN '0.005' WHEN seconds <= 0.01 THEN '0.01' WHEN seconds <= 0.025 THEN '0.025' WHEN seconds <= 0.05 THEN '0.05'
        WHEN seconds <= 0.1 THEN '0.1' WHEN seconds <= 0.25 THEN '0.25' WHEN seconds <= 0.5 THEN '0.5' WHEN seconds <= 1 THEN '1.0'
        WHEN seconds <= 2.5 THEN '2.5' WHEN seconds <= 5 THEN '5.0' WHEN seconds <= 10 THEN '10.0' WHEN seconds <= 30 THEN '30.0'
        WHEN seconds <= 60 THEN '60.0' WHEN seconds <= 120 THEN '120.0' WHEN seconds <= 300 THEN '300.0' WHEN seconds <= 600 THEN '600.0'
        WHEN seconds <= 1800 THEN '1800.0' WHEN seconds <= 3600 THEN '3600.0' ELSE '+Inf' END),
           1, COALESCE(seconds, 0)
    FROM (SELECT COALESCE(NEW.duration,
        (julianday(NEW.finished_at) - julianday(NEW.attempted_at)) * 86400.0) AS seconds)
    WHERE true
    ON CONFLICT (queue, type, outcome, le) DO UPDATE
    SET attempts = tickq_totals.attempts + 1, seconds = tickq_totals.seconds + excluded.seconds;
END;

-- A done job deleted (pruned, or deleted by hand).
CREATE TRIGGER tickq_count_pruned AFTER DELETE ON tickq_jobs
WHEN OLD.status = 'done'
BEGIN
    INSERT INTO tickq_pruned (queue, type, jobs) VALUES (OLD.queue, OLD.type, 1)
    ON CONFLICT (queue, type) DO UPDATE SET jobs = tickq_pruned.jobs + 1;
END;
