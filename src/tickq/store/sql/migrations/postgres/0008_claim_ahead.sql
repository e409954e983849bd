-- tickq schema 8 (PostgreSQL): jobs a worker claims ahead of its free slots.
-- (Numbers 7 and 9 are taken by other changes; each is applied once, in order.)
-- ahead: 0 = claimed to start at once (or not claimed); 1 = claimed ahead to wait in a
-- worker's line, not yet known to have started; 2 = once given back by a rescue with its
-- attempt refunded: never claimed ahead again, so a job that kills its worker each time
-- still runs out of attempts. 1 means something only while the job is running. A constant
-- default: adding the column rewrites no row, whatever the table's size.
ALTER TABLE tickq_jobs ADD COLUMN ahead SMALLINT NOT NULL DEFAULT 0;

-- tickq_due (migration 4) for claims ahead: the same walk of the claim index, skipping
-- jobs once refunded.
CREATE FUNCTION tickq_due_ahead(lim integer, queues text[], at timestamptz)
RETURNS SETOF bigint
LANGUAGE plpgsql VOLATILE
SET enable_sort = off
SET enable_bitmapscan = off
AS $$
BEGIN
    RETURN QUERY
    SELECT id FROM tickq_jobs
    WHERE status = 'pending' AND run_after <= COALESCE(at, now())
      AND (queues IS NULL OR queue = ANY(queues)) AND ahead < 2
    ORDER BY priority DESC, run_after, id
    LIMIT lim
    FOR UPDATE SKIP LOCKED;
END
$$;
