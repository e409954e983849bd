-- tickq schema 3 (PostgreSQL): measured durations, totals kept when jobs are pruned,
-- and an index for failure windows.
-- Processed totals and the duration histogram are read from the table; pruning first
-- adds the rows it deletes here, so those figures never go down.
CREATE TABLE tickq_totals (
    queue    TEXT             NOT NULL,
    type     TEXT             NOT NULL,
    outcome  TEXT             NOT NULL,
    le       TEXT             NOT NULL,
    attempts BIGINT           NOT NULL DEFAULT 0,
    seconds  DOUBLE PRECISION NOT NULL DEFAULT 0,
    PRIMARY KEY (queue, type, outcome, le)
);
-- How long each attempt's job function ran, as the worker measured it: jobs claimed in one
-- batch are recorded together, so their timestamps alone would overstate short jobs.
ALTER TABLE tickq_jobs ADD COLUMN duration DOUBLE PRECISION;
ALTER TABLE tickq_attempts ADD COLUMN duration DOUBLE PRECISION;
-- Alerts count the failed attempts of one type within a window.
CREATE INDEX tickq_attempts_finished ON tickq_attempts (finished_at);
