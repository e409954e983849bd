-- tickq schema 14 (SQLite): leases and schedules that no wall-clock step or skew between
-- processes can fool. (Numbers 12 and 13 are taken by other changes; each is applied
-- once, in order.) Postgres needs neither: the database's own clock decides there.
-- lease_clock: the monotonic clock a lease was measured on (``boot:<id>``: the host's
-- CLOCK_MONOTONIC, one clock for every process until the next reboot), a space, and the
-- lease_expires_at it was set with (a holder that doesn't write lease_clock, such as an
-- older version, changes lease_expires_at and so falls back to the wall clock);
-- lease_mono: when the lease runs out on that clock. A rescuer on the same clock judges
-- by lease_mono, any other by lease_expires_at.
ALTER TABLE tickq_jobs ADD COLUMN lease_clock TEXT;
ALTER TABLE tickq_jobs ADD COLUMN lease_mono REAL;

-- What each live process's wall clock says, as an offset from the shared monotonic clock
-- (wall seconds since 1970 minus monotonic seconds); seen: that monotonic clock's reading
-- when the process last said so. A schedule slot comes due when most live clocks say so.
CREATE TABLE tickq_clocks (
    owner  TEXT PRIMARY KEY,
    domain TEXT NOT NULL,
    offset REAL NOT NULL,
    seen   REAL NOT NULL,
    seen_at TEXT NOT NULL
);
