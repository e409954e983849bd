-- tickq schema 9 (PostgreSQL): queue controls, checked inside the claim (tickq_due), so
-- every process on every machine obeys them (see docs/controls.md).
-- Paused queues: their jobs are not claimed until resumed (enqueueing still works).
CREATE TABLE tickq_paused (
    queue     text PRIMARY KEY,
    paused_at timestamptz NOT NULL DEFAULT now()
);

-- Limits of job types, written by the first claim of a process that registers the type:
-- at most `concurrency` running at once, at most `rate` starts within any `per` seconds.
-- A type listed here is claimed only through its limits, never ahead.
CREATE TABLE tickq_limits (
    type        text PRIMARY KEY,
    concurrency integer CHECK (concurrency IS NULL OR concurrency >= 1),
    rate        integer CHECK (rate IS NULL OR rate >= 1),
    per         double precision CHECK (per IS NULL OR per > 0),
    updated_at  timestamptz NOT NULL DEFAULT now()
);

-- Starts of rate-limited types, kept for one window: the rate check counts them.
CREATE TABLE tickq_starts (
    type text NOT NULL,
    at   timestamptz NOT NULL
);
CREATE INDEX tickq_starts_type ON tickq_starts (type, at);

-- The due jobs of limited types, as many as their limits allow now, locked; the rate
-- limit's starts are written here (the claim that calls this moves every id it returns to
-- running). One claimer at a time looks at a type (a transaction-scoped advisory lock,
-- which transaction poolers allow); others skip it rather than wait. Running jobs whose
-- lease ran out don't count: their worker is gone.
CREATE FUNCTION tickq_due_limited(lim integer, queues text[], at timestamptz)
RETURNS SETOF bigint
LANGUAGE plpgsql VOLATILE
SET enable_sort = off
SET enable_bitmapscan = off
AS $$
DECLARE
    t record;
    ts timestamptz;
    allowed integer;
    ids bigint[];
BEGIN
    FOR t IN SELECT l.type, l.concurrency, l.rate, l.per FROM tickq_limits l ORDER BY l.type LOOP
        EXIT WHEN lim <= 0;
        CONTINUE WHEN NOT pg_try_advisory_xact_lock(
            hashtext('tickq_limit'), hashtext(current_schema() || '.' || t.type));
        -- The time once the lock is held, not the transaction's start: the starts the rate
        -- limit counts are then in the order they happened.
        ts := COALESCE(at, clock_timestamp());
        allowed := lim;
        IF t.concurrency IS NOT NULL THEN
            allowed := LEAST(allowed, t.concurrency - (
                SELECT count(*) FROM tickq_jobs
                WHERE status = 'running' AND type = t.type AND lease_expires_at > ts));
        END IF;
        IF t.rate IS NOT NULL THEN
            allowed := LEAST(allowed, t.rate - (
                SELECT count(*) FROM tickq_starts
                WHERE type = t.type AND tickq_starts.at > ts - make_interval(secs => t.per)));
        END IF;
        CONTINUE WHEN allowed <= 0;
        ids := ARRAY(
            SELECT id FROM tickq_jobs
            WHERE status = 'pending' AND run_after <= ts AND type = t.type
              AND (queues IS NULL OR queue = ANY(queues))
              AND NOT EXISTS (SELECT 1 FROM tickq_paused p WHERE p.queue = tickq_jobs.queue)
            ORDER BY priority DESC, run_after, id
            LIMIT allowed
            FOR UPDATE SKIP LOCKED);
        IF t.rate IS NOT NULL AND cardinality(ids) > 0 THEN
            DELETE FROM tickq_starts
            WHERE type = t.type AND tickq_starts.at <= ts - make_interval(secs => t.per);
            INSERT INTO tickq_starts (type, at) SELECT t.type, ts FROM unnest(ids);
        END IF;
        lim := lim - cardinality(ids);
        RETURN QUERY SELECT unnest(ids);
    END LOOP;
END
$$;

-- The claims (migrations 4 and 8) now skip paused queues and limited types, and take the
-- due jobs of limited types through tickq_due_limited first. With no queue paused and no
-- limit declared they run the query they ran before (two probes of empty tables more).
CREATE OR REPLACE FUNCTION tickq_due(lim integer, queues text[], at timestamptz)
RETURNS SETOF bigint
LANGUAGE plpgsql VOLATILE
SET enable_sort = off
SET enable_bitmapscan = off
AS $$
DECLARE
    taken integer := 0;
BEGIN
    IF EXISTS (SELECT 1 FROM tickq_limits) THEN
        RETURN QUERY SELECT tickq_due_limited(lim, queues, at);
        GET DIAGNOSTICS taken = ROW_COUNT;
    ELSIF NOT EXISTS (SELECT 1 FROM tickq_paused) THEN
        RETURN QUERY
        SELECT id FROM tickq_jobs
        WHERE status = 'pending' AND run_after <= COALESCE(at, now())
          AND (queues IS NULL OR queue = ANY(queues))
        ORDER BY priority DESC, run_after, id
        LIMIT lim
        FOR UPDATE SKIP LOCKED;
        RETURN;
    END IF;
    IF lim - taken > 0 THEN
        RETURN QUERY
        SELECT id FROM tickq_jobs
        WHERE status = 'pending' AND run_after <= COALESCE(at, now())
          AND (queues IS NULL OR queue = ANY(queues))
          AND NOT EXISTS (SELECT 1 FROM tickq_paused p WHERE p.queue = tickq_jobs.queue)
          AND NOT EXISTS (SELECT 1 FROM tickq_limits l WHERE l.type = tickq_jobs.type)
        ORDER BY priority DESC, run_after, id
        LIMIT lim - taken
        FOR UPDATE SKIP LOCKED;
    END IF;
END
$$;

CREATE OR REPLACE FUNCTION tickq_due_ahead(lim integer, queues text[], at timestamptz)
RETURNS SETOF bigint
LANGUAGE plpgsql VOLATILE
SET enable_sort = off
SET enable_bitmapscan = off
AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM tickq_limits) AND NOT EXISTS (SELECT 1 FROM tickq_paused) THEN
        RETURN QUERY
        SELECT id FROM tickq_jobs
        WHERE status = 'pending' AND run_after <= COALESCE(at, now())
          AND (queues IS NULL OR queue = ANY(queues)) AND ahead < 2
        ORDER BY priority DESC, run_after, id
        LIMIT lim
        FOR UPDATE SKIP LOCKED;
        RETURN;
    END IF;
    RETURN QUERY
    SELECT id FROM tickq_jobs
    WHERE status = 'pending' AND run_after <= COALESCE(at, now())
      AND (queues IS NULL OR queue = ANY(queues)) AND ahead < 2
      AND NOT EXISTS (SELECT 1 FROM tickq_paused p WHERE p.queue = tickq_jobs.queue)
      AND NOT EXISTS (SELECT 1 FROM tickq_limits l WHERE l.type = tickq_jobs.type)
    ORDER BY priority DESC, run_after, id
    LIMIT lim
    FOR UPDATE SKIP LOCKED;
END
$$;
