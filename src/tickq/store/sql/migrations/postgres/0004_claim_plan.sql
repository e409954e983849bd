-- tickq schema 4 (PostgreSQL): claims always walk the claim index in claim order.
-- Before a table's first ANALYZE (e.g. right after a bulk enqueue) the planner could pick a
-- bitmap scan and sort every due pending row to find the first few (300 ms per claim at a
-- million rows, 45 ms at 100,000). Inside this function sorts and bitmap scans are off, so
-- the index scan that stops after `lim` rows is the only plan, with or without statistics.
CREATE FUNCTION tickq_due(lim integer, queues text[], at timestamptz)
RETURNS SETOF bigint
LANGUAGE plpgsql VOLATILE
SET enable_sort = off
SET enable_bitmapscan = off
AS $$
BEGIN
    RETURN QUERY
    SELECT id FROM tickq_jobs
    WHERE status = 'pending' AND run_after <= COALESCE(at, now())
      AND (queues IS NULL OR queue = ANY(queues))
    ORDER BY priority DESC, run_after, id
    LIMIT lim
    FOR UPDATE SKIP LOCKED;
END
$$;
