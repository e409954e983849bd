-- tickq schema 20 (Postgres): retention by default (see docs/jobs.md, "Retention"). One row
-- says when the next pruning pass is due across every process: a process takes the pass
-- with one fenced upsert (due_at <= now; the row is made by the first), so only one prunes per interval.
-- owner: who took the last pass; last_pruned_at: when a pass last ended; pruned: the jobs
-- that pass (and the batches before it, while behind) deleted; behind: true when it found
-- more than a batch (due again at once, the next tick or worker step goes on).
CREATE TABLE tickq_retention (
    id             integer     PRIMARY KEY CHECK (id = 1),
    due_at         timestamptz NOT NULL,
    owner          text,
    last_pruned_at timestamptz,
    pruned         bigint      NOT NULL DEFAULT 0,
    behind         boolean     NOT NULL DEFAULT false
);
