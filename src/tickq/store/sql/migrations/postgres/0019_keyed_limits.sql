-- tickq schema 19 (PostgreSQL): limits per key, @q.job(concurrency_key=...) (see
-- docs/controls.md). Claims of types without a key run the statements they ran before.
-- The key a keyed type's limits apply to (@q.job(concurrency_key=...)), computed at
-- enqueue; NULL for every other job. Two partial indexes hold keyed jobs only, so a job
-- without a key pays nothing for them.
ALTER TABLE tickq_jobs ADD COLUMN concurrency_key TEXT;
-- A keyed type's pending jobs by key, in claim order within each key: the claim steps
-- from one key to the next through it (min over "key > previous") and takes each head.
CREATE INDEX tickq_jobs_keyed ON tickq_jobs (type, concurrency_key, priority DESC, run_after, id)
    WHERE status = 'pending' AND concurrency_key IS NOT NULL;
-- A keyed type's running jobs by key and lease: the claim counts one key's live ones.
CREATE INDEX tickq_jobs_keyed_running ON tickq_jobs (type, concurrency_key, lease_expires_at)
    WHERE status = 'running' AND concurrency_key IS NOT NULL;
-- keyed: the type's limits hold per concurrency key, not for the whole type.
ALTER TABLE tickq_limits ADD COLUMN keyed BOOLEAN NOT NULL DEFAULT false;
-- key: the start's concurrency key (a keyed type's rate limit counts per key).
ALTER TABLE tickq_starts ADD COLUMN key TEXT;
CREATE INDEX tickq_starts_key ON tickq_starts (type, key, at) WHERE key IS NOT NULL;
-- Where the last claim of a keyed type stopped among its keys (NULL: at the first): the
-- next one goes on from there, so keys take turns whatever their names or backlogs.
CREATE TABLE tickq_key_cursors (
    type TEXT PRIMARY KEY,
    key  TEXT
);

-- The claim functions, as before but for keyed types.
-- The due jobs of one keyed type, as many as each key's limits allow now, locked, with
-- the rate limit's starts written per key. Keys take turns: the walk starts after the
-- key where the last claim stopped (tickq_key_cursors), goes on to the last key, then
-- from the first, and stops when it has `lim` jobs, is back where it started, or has
-- looked at 64 keys more than `lim` (the next claim goes on from there): a key at its
-- limit, however long its backlog, costs one probe. The caller holds the type's
-- advisory lock, so the counts hold until it commits. for_ahead: for a claim ahead (jobs
-- once refunded are skipped).
CREATE FUNCTION tickq_due_keyed(typ text, most integer, rate integer, per double precision,
                                lim integer, queues text[], ts timestamptz,
                                for_ahead boolean)
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
            INSERT INTO tickq_starts (type, key, at) SELECT typ, k, ts FROM unnest(ids);
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
-- gone.
CREATE OR REPLACE FUNCTION tickq_due_limited(lim integer, queues text[], at timestamptz)
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
        CONTINUE WHEN NOT pg_try_advisory_xact_lock(
            hashtext('tickq_limit'), hashtext(current_schema() || '.' || t.type));
        -- The time once the lock is held, not the transaction's start: the starts the rate
        -- limit counts are then in the order they happened.
        ts := COALESCE(at, clock_timestamp());
        IF t.keyed THEN
            RETURN QUERY SELECT tickq_due_keyed(t.type, t.concurrency, t.rate, t.per, lim,
                                                queues, ts, false);
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

-- Up to `lim` due jobs (at: the injected clock's now, NULL: the database's) in `queues`
-- (NULL: all) for a claim to start at once: limited types first, through
-- tickq_due_limited; paused queues skipped. A keyed type's job without a key (enqueued
-- before the type had one) is claimed as if the type were unlimited: never stranded. With no queue paused and no limit declared it
-- is one walk of the claim index (two probes of empty tables more).
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
          AND NOT EXISTS (SELECT 1 FROM tickq_limits l WHERE l.type = tickq_jobs.type
                          AND (NOT l.keyed OR tickq_jobs.concurrency_key IS NOT NULL))
        ORDER BY priority DESC, run_after, id
        LIMIT lim - taken
        FOR UPDATE SKIP LOCKED;
    END IF;
END
$$;

-- tickq_due for claims ahead of a worker's free slots: the same walk, skipping jobs once
-- refunded (ahead = 2), paused queues and limited types, but for keyed types with only a
-- concurrency limit: those are claimed ahead within each key's room (a job claimed ahead
-- counts as running for its key until it ends), under the type's advisory lock.
CREATE OR REPLACE FUNCTION tickq_due_ahead(lim integer, queues text[], at timestamptz)
RETURNS SETOF bigint
LANGUAGE plpgsql VOLATILE
SET enable_sort = off
SET enable_bitmapscan = off
AS $$
DECLARE
    t record;
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
    FOR t IN SELECT l.type, l.concurrency FROM tickq_limits l
             WHERE l.keyed AND l.rate IS NULL ORDER BY l.type LOOP
        EXIT WHEN lim <= 0;
        CONTINUE WHEN NOT pg_try_advisory_xact_lock(
            hashtext('tickq_limit'), hashtext(current_schema() || '.' || t.type));
        RETURN QUERY SELECT tickq_due_keyed(t.type, t.concurrency, NULL, NULL, lim, queues,
                                            COALESCE(at, clock_timestamp()), true);
        GET DIAGNOSTICS taken = ROW_COUNT;
        lim := lim - taken;
    END LOOP;
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
