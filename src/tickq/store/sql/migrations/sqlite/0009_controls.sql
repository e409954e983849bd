-- tickq schema 9 (SQLite): queue controls, read by every claim, so every process obeys
-- them (see docs/controls.md).
-- Paused queues: their jobs are not claimed until resumed (enqueueing still works).
CREATE TABLE tickq_paused (
    queue     TEXT PRIMARY KEY,
    paused_at TEXT NOT NULL
);

-- Limits of job types, written by the first claim of a process that registers the type:
-- at most `concurrency` running at once, at most `rate` starts within any `per` seconds.
-- A type listed here is claimed only by the claim that checks its limits, never ahead.
CREATE TABLE tickq_limits (
    type        TEXT PRIMARY KEY,
    concurrency INTEGER CHECK (concurrency IS NULL OR concurrency >= 1),
    rate        INTEGER CHECK (rate IS NULL OR rate >= 1),
    per         REAL    CHECK (per IS NULL OR per > 0),
    updated_at  TEXT    NOT NULL
);

-- Starts of rate-limited types (epoch seconds), kept for one window: the rate check
-- counts them. Claims of unlimited types never write here.
CREATE TABLE tickq_starts (
    type TEXT NOT NULL,
    at   REAL NOT NULL
);
CREATE INDEX tickq_starts_type ON tickq_starts (type, at);
