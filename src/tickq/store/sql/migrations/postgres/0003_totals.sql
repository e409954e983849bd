-- tickq schema 3 (PostgreSQL): totals kept when jobs are pruned, and failure windows.
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
-- Alerts count the failed attempts of one type within a window.
CREATE INDEX tickq_attempts_finished ON tickq_attempts (finished_at);
