-- tickq schema 26 (PostgreSQL): a claim first probes the due index and returns at once
-- when nothing is due. The claim index is in priority order, so a walk for due jobs
-- can't stop at the first job not due yet: with 100,000 jobs pending for tomorrow an
-- empty claim (every empty tick, every idle worker poll, the last claim of a tick) read
-- all their entries (495 buffers; issue 27). Same signatures: only the bodies change.
CREATE OR REPLACE FUNCTION tickq_due(lim integer, queues text[], at timestamptz)
RETURNS SETOF bigint
LANGUAGE plpgsql VOLATILE
SET enable_sort = off
SET enable_bitmapscan = off
AS $$
DECLARE
    taken integer := 0;
BEGIN
    -- min(): the due index's first entry, whatever the plan (an EXISTS with the time as a
    -- parameter got a generic plan that scanned the table).
    IF COALESCE((SELECT min(run_after) FROM tickq_jobs WHERE status = 'pending')
                > COALESCE(at, now()), true) THEN
        RETURN;  -- nothing due (or nothing pending): see the comment above
    END IF;
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
          AND NOT EXISTS (SELECT 1 FROM tickq_limits l WHERE l.type = tickq_jobs.type
                          AND (NOT l.keyed OR tickq_jobs.concurrency_key IS NOT NULL))
        ORDER BY priority DESC, run_after, id
        LIMIT lim - taken
        FOR UPDATE SKIP LOCKED;
    END IF;
END
$$;

CREATE OR REPLACE FUNCTION tickq_due_ahead(lim integer, queues text[], at timestamptz,
                                wait double precision DEFAULT NULL)
RETURNS SETOF bigint
LANGUAGE plpgsql VOLATILE
SET enable_sort = off
SET enable_bitmapscan = off
AS $$
DECLARE
    taken integer;
BEGIN
    -- min(): the due index's first entry, whatever the plan (an EXISTS with the time as a
    -- parameter got a generic plan that scanned the table).
    IF COALESCE((SELECT min(run_after) FROM tickq_jobs WHERE status = 'pending')
                > COALESCE(at, now()), true) THEN
        RETURN;  -- nothing due (or nothing pending): see the comment above
    END IF;
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
    IF EXISTS (SELECT 1 FROM tickq_limits) THEN
        RETURN QUERY SELECT tickq_due_limited(lim, queues, at, true, wait);
        GET DIAGNOSTICS taken = ROW_COUNT;
        lim := lim - taken;
    END IF;
    IF lim <= 0 THEN
        RETURN;
    END IF;
    RETURN QUERY
    SELECT id FROM tickq_jobs
    WHERE status = 'pending' AND run_after <= COALESCE(at, now())
      AND (queues IS NULL OR queue = ANY(queues)) AND ahead < 2
      AND NOT EXISTS (SELECT 1 FROM tickq_paused p WHERE p.queue = tickq_jobs.queue)
      AND NOT EXISTS (SELECT 1 FROM tickq_limits l WHERE l.type = tickq_jobs.type
                      AND (NOT l.keyed OR tickq_jobs.concurrency_key IS NOT NULL))
    ORDER BY priority DESC, run_after, id
    LIMIT lim
    FOR UPDATE SKIP LOCKED;
END
$$;
