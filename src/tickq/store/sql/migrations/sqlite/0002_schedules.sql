-- tickq schema 2 (SQLite): schedule cursors and the last tick.
-- One row per schedule: every slot at or before handled_until has been enqueued (or
-- skipped as missed). A tick moves it only from the value it read, in the same transaction
-- that inserts the slot's job, so a slot is enqueued once ever, even after its job is pruned.
CREATE TABLE tickq_schedules (
    name          TEXT PRIMARY KEY,
    handled_until TEXT NOT NULL,
    last_slot     TEXT,
    updated_at    TEXT NOT NULL
);

-- One row: when the last tick began and how many there were, for the health endpoint.
CREATE TABLE tickq_ticks (
    id           INTEGER PRIMARY KEY CHECK (id = 1),
    last_tick_at TEXT    NOT NULL,
    ticks        INTEGER NOT NULL DEFAULT 1
);
