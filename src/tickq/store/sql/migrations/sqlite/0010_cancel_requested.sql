-- tickq schema 10 (SQLite): cancelling a running job is a request the job can observe.
-- (Number 9 is taken by another change; each is applied once, in order.)
-- cancel_requested_at: when q.cancel(id) asked the running attempt to stop (NULL: never).
-- The worker holding the job reads it when it renews or checks its leases; a running job
-- with a request ends cancelled (not retried) whether it stops, errs or its worker dies.
ALTER TABLE tickq_jobs ADD COLUMN cancel_requested_at TEXT;
