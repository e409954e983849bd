-- Retention (migration 20): the background pruning duty, see tickq/retention.py.

-- name: claim_retention
-- The pass is this process's when it is due (or no process ever took one); it holds it
-- for :hold seconds (a process that dies mid-pass hands it on then). Answers now.
INSERT INTO tickq_retention (id, due_at, owner) VALUES (1, COALESCE(CAST(:now AS timestamptz), now()) + make_interval(secs => :hold), :owner)
ON CONFLICT (id) DO UPDATE SET due_at = excluded.due_at, owner = excluded.owner
WHERE tickq_retention.due_at <= COALESCE(CAST(:now AS timestamptz), now())
RETURNING COALESCE(CAST(:now AS timestamptz), now())

-- name: end_retention_pass
-- Behind: due again at once (the next tick or worker step takes the next batch), the
-- pass's count growing; caught up: due after the interval.
UPDATE tickq_retention
SET due_at = COALESCE(CAST(:now AS timestamptz), now())
             + CASE WHEN :behind THEN interval '0' ELSE make_interval(secs => :interval) END,
    pruned = CASE WHEN behind THEN pruned + :pruned ELSE :pruned END,
    behind = :behind, last_pruned_at = COALESCE(CAST(:now AS timestamptz), now())
WHERE id = 1 AND owner = :owner

-- name: retention_state
SELECT due_at, owner, last_pruned_at, pruned, behind FROM tickq_retention WHERE id = 1

-- name: prune_retained
-- One batch of finished jobs past their status's retention (NULL: kept forever), in one
-- queue (:queue) or in all but those with rules of their own (:others). Never a job
-- enqueued with keep=True, nor one of a workflow run that has not ended (its driver or
-- a step's job). What they counted stays in tickq_totals (retire_doomed).
WITH doomed AS (
SELECT j.id FROM tickq_jobs j
WHERE j.finished_at < CAST(:oldest AS timestamptz) AND j.status IN ('done', 'failed', 'cancelled')
  AND ((j.status = 'done' AND j.finished_at < CAST(:done AS timestamptz))
       OR (j.status = 'failed' AND j.finished_at < CAST(:failed AS timestamptz))
       OR (j.status = 'cancelled' AND j.finished_at < CAST(:cancelled AS timestamptz)))
  AND (CAST(:queue AS text) IS NULL OR j.queue = :queue)
  AND (CAST(:others AS text[]) IS NULL OR j.queue <> ALL (CAST(:others AS text[])))
  AND j.meta -> 'keep' IS NULL
  AND NOT EXISTS (SELECT 1 FROM tickq_workflow_runs r
                  WHERE r.id = j.id AND r.status IN ('running', 'waiting'))
  AND NOT EXISTS (SELECT 1 FROM tickq_workflow_steps s
                  JOIN tickq_workflow_runs r ON r.id = s.run_id
                  WHERE s.job_id = j.id AND r.status IN ('running', 'waiting'))
LIMIT :batch),
{@retire_doomed}

-- name: wf_prune_retained_steps
-- The steps of one batch of ended workflow runs past their status's retention.
DELETE FROM tickq_workflow_steps WHERE run_id IN (
    SELECT id FROM tickq_workflow_runs
    WHERE (status = 'done' AND finished_at < CAST(:done AS timestamptz)) OR (status = 'failed' AND finished_at < CAST(:failed AS timestamptz))
       OR (status = 'cancelled' AND finished_at < CAST(:cancelled AS timestamptz))
    LIMIT :batch)

-- name: wf_prune_retained_runs
DELETE FROM tickq_workflow_runs WHERE id IN (
    SELECT id FROM tickq_workflow_runs r
    WHERE ((status = 'done' AND finished_at < CAST(:done AS timestamptz))
           OR (status = 'failed' AND finished_at < CAST(:failed AS timestamptz))
           OR (status = 'cancelled' AND finished_at < CAST(:cancelled AS timestamptz)))
      AND NOT EXISTS (SELECT 1 FROM tickq_workflow_steps s WHERE s.run_id = r.id)
    LIMIT :batch)
