-- tickq schema 11 (SQLite): jobs that wait without failing (raise Snooze(seconds)).
-- (Numbers 9 and 10 are taken by other changes; each is applied once, in order.)
-- snoozes: how many times the job snoozed (none of them is an attempt); snoozed_since:
-- when it first snoozed since it was enqueued or retried by hand (max_snooze runs from it).
ALTER TABLE tickq_jobs ADD COLUMN snoozes INTEGER NOT NULL DEFAULT 0;
ALTER TABLE tickq_jobs ADD COLUMN snoozed_since TEXT;

-- A snoozed run is kept in the history under the number of the attempt that follows it,
-- told apart by its snooze number (0 for every real attempt): the key gains that column.
-- SQLite can't change a primary key in place, so the table is copied once.
CREATE TABLE tickq_attempts_snooze (
    job_id      INTEGER NOT NULL,
    attempt     INTEGER NOT NULL,
    snooze      INTEGER NOT NULL DEFAULT 0,
    started_at  TEXT,
    finished_at TEXT    NOT NULL,
    outcome     TEXT    NOT NULL,
    error       TEXT,
    duration    REAL,
    PRIMARY KEY (job_id, attempt, snooze)
);
INSERT INTO tickq_attempts_snooze (job_id, attempt, started_at, finished_at, outcome, error,
                                   duration)
SELECT job_id, attempt, started_at, finished_at, outcome, error, duration FROM tickq_attempts;
DROP TABLE tickq_attempts;
ALTER TABLE tickq_attempts_snooze RENAME TO tickq_attempts;
CREATE INDEX tickq_attempts_finished ON tickq_attempts (finished_at);
