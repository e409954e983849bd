-- tickq schema 23 (PostgreSQL): limited types are claimed ahead of a worker's free slots,
-- within the room their limits leave (docs/controls.md): a job claimed ahead counts as
-- running until it ends, and, for a rate limit, as started at the latest time it may
-- start (the claimer's `wait`: it starts the job within that time or gives it back).
-- The functions get new arguments, with defaults, so calls written for schema 19 still
-- work (a claim ahead without `wait` takes no rate-limited type, as before).
DROP FUNCTION tickq_due_ahead(integer, text[], timestamptz);
DROP FUNCTION tickq_due_limited(integer, text[], timestamptz);
DROP FUNCTION tickq_due_keyed(text, integer, integer, double precision, integer, text[],
                              timestamptz, boolean);

-- The due jobs of one keyed type, as many as each key's limits allow now, locked, with
-- the rate limit's starts written per key. Keys take turns: the walk starts after the
-- key where the last claim stopped (tickq_key_cursors), goes on to the last key, then
-- from the first, and stops when it has `lim` jobs, is back where it started, or has
-- looked at 64 keys more than `lim` (the next claim goes on from there): a key at its
-- limit, however long its backlog, costs one probe. The caller holds the type's
-- advisory lock, so the counts hold until it commits. for_ahead: for a claim ahead (jobs
-- once refunded are skipped); wait: each start is written that many seconds after `ts`
-- (a claim ahead's: the latest its job may start, see tickq_due_ahead).
CREATE FUNCTION tickq_due_keyed(typ text, most integer, rate integer, per double precision,
                                lim integer, queues text[], ts timestamptz,
                                for_ahead boolean, wait double precision DEFAULT 0)
RETURNS SETOF bigint
LANGUAGE plpgsql VOLATILE
SET enable_sort = off
SET enable_bitmapscan = off
AS $$
DECLARE
    start text := (SELECT c.key FROM tickq_key_cursors c WHERE c.type = typ);
    k text := start;
    last text := start;
    wrapped boolean := false;
    looks integer := 64 + lim;
    room integer;
    ids bigint[];
BEGIN
    LOOP
        EXIT WHEN lim <= 0 OR looks <= 0;
        -- Two statements, not "k IS NULL OR key > k": a cached generic plan of that scans
        -- every pending job of the type for the minimum.
        IF k IS NULL THEN
            k := (SELECT min(j.concurrency_key) FROM tickq_jobs j
                  WHERE j.status = 'pending' AND j.type = typ AND j.concurrency_key IS NOT NULL);
        ELSE
            k := (SELECT min(j.concurrency_key) FROM tickq_jobs j
                  WHERE j.status = 'pending' AND j.type = typ AND j.concurrency_key > k);
        END IF;
        IF k IS NULL THEN
            EXIT WHEN wrapped OR start IS NULL;
            wrapped := true;
            CONTINUE;
        END IF;
        EXIT WHEN wrapped AND k > start;
        looks := looks - 1;
        last := k;
        room := lim;
        IF most IS NOT NULL THEN
            room := LEAST(room, most - (
                SELECT count(*) FROM tickq_jobs r
                WHERE r.status = 'running' AND r.type = typ AND r.concurrency_key = k
                  AND r.lease_expires_at > ts));
        END IF;
        IF rate IS NOT NULL THEN
            room := LEAST(room, rate - (
                SELECT count(*) FROM tickq_starts s
                WHERE s.type = typ AND s.key = k AND s.at > ts - make_interval(secs => per)));
        END IF;
        CONTINUE WHEN room <= 0;
        ids := ARRAY(
            SELECT id FROM tickq_jobs j
            WHERE j.status = 'pending' AND j.type = typ AND j.concurrency_key = k
              AND j.run_after <= ts AND (queues IS NULL OR j.queue = ANY(queues))
              AND (NOT for_ahead OR j.ahead < 2)
              AND NOT EXISTS (SELECT 1 FROM tickq_paused p WHERE p.queue = j.queue)
            ORDER BY j.priority DESC, j.run_after, j.id
            LIMIT room
            FOR UPDATE SKIP LOCKED);
        CONTINUE WHEN cardinality(ids) = 0;
        IF rate IS NOT NULL THEN
            DELETE FROM tickq_starts s
            WHERE s.type = typ AND s.at <= ts - make_interval(secs => per);
            INSERT INTO tickq_starts (type, key, at)
            SELECT typ, k, ts + make_interval(secs => wait) FROM unnest(ids);
        END IF;
        lim := lim - cardinality(ids);
        RETURN QUERY SELECT unnest(ids);
    END LOOP;
    IF last IS DISTINCT FROM start THEN
        INSERT INTO tickq_key_cursors (type, key) VALUES (typ, last)
        ON CONFLICT (type) DO UPDATE SET key = EXCLUDED.key;
    END IF;
END
$$;

-- The due jobs of limited types, as many as their limits allow now; the rate limit's
-- starts are written here, a keyed type's by tickq_due_keyed. One claimer at a time looks
-- at a type (a transaction-scoped advisory lock, which transaction poolers allow); others
-- skip it rather than wait. Running jobs whose lease ran out don't count: their worker is
-- gone; jobs claimed ahead, waiting in a worker's line, count as running. for_ahead: for
-- a claim ahead (jobs once refunded are skipped), which takes rate-limited types only
-- when the claimer says within how many seconds (`wait`) it starts each job or gives it
-- back unstarted: its start is written at that time, so however late in that time it
-- starts, no window of the period holds more starts than the limit.
CREATE FUNCTION tickq_due_limited(lim integer, queues text[], at timestamptz,
                                  for_ahead boolean DEFAULT false,
                                  wait double precision DEFAULT NULL)
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
    keyed integer;
BEGIN
    FOR t IN SELECT l.type, l.concurrency, l.rate, l.per, l.keyed FROM tickq_limits l
             ORDER BY l.type LOOP
        EXIT WHEN lim <= 0;
        CONTINUE WHEN for_ahead AND wait IS NULL AND t.rate IS NOT NULL;
        CONTINUE WHEN NOT pg_try_advisory_xact_lock(
            hashtext('tickq_limit'), hashtext(current_schema() || '.' || t.type));
        -- The time once the lock is held, not the transaction's start: the starts the rate
        -- limit counts are then in the order they happened.
        ts := COALESCE(at, clock_timestamp());
        IF t.keyed THEN
            RETURN QUERY SELECT tickq_due_keyed(t.type, t.concurrency, t.rate, t.per, lim,
                                                queues, ts, for_ahead, COALESCE(wait, 0));
            GET DIAGNOSTICS keyed = ROW_COUNT;
            lim := lim - keyed;
            CONTINUE;
        END IF;
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
              AND (queues IS NULL OR queue = ANY(queues)) AND (NOT for_ahead OR ahead < 2)
              AND NOT EXISTS (SELECT 1 FROM tickq_paused p WHERE p.queue = tickq_jobs.queue)
            ORDER BY priority DESC, run_after, id
            LIMIT allowed
            FOR UPDATE SKIP LOCKED);
        IF t.rate IS NOT NULL AND cardinality(ids) > 0 THEN
            DELETE FROM tickq_starts
            WHERE type = t.type AND tickq_starts.at <= ts - make_interval(secs => t.per);
            INSERT INTO tickq_starts (type, at)
            SELECT t.type, ts + make_interval(secs => COALESCE(wait, 0)) FROM unnest(ids);
        END IF;
        lim := lim - cardinality(ids);
        RETURN QUERY SELECT unnest(ids);
    END LOOP;
END
$$;

-- tickq_due for claims ahead of a worker's free slots: the same walk, skipping jobs once
-- refunded (ahead = 2) and paused queues; limited types are claimed ahead within their
-- room, through tickq_due_limited (a job claimed ahead counts as running until it ends;
-- with a rate limit, as started at the latest time it may start: `wait` seconds from
-- now, within which the claimer starts it or gives it back; NULL: rate-limited types are
-- not claimed ahead).
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
