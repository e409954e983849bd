-- tickq schema 20 (SQLite): retention by default (see docs/jobs.md, "Retention"). One row
-- says when the next pruning pass is due across every process: a process takes the pass
-- with one fenced upsert (due_at <= now; the row is made by the first), so only one prunes per interval.
-- owner: who took the last pass; last_pruned_at: when a pass last ended; pruned: the jobs
-- that pass (and the batches before it, while behind) deleted; behind: 1 when it found
-- more than a batch (due again at once, the next tick or worker step goes on).
CREATE TABLE tickq_retention (
    id             INTEGER PRIMARY KEY CHECK (id = 1),
    due_at         TEXT    NOT NULL,
    owner          TEXT,
    last_pruned_at TEXT,
    pruned         INTEGER NOT NULL DEFAULT 0,
    behind         INTEGER NOT NULL DEFAULT 0
);
