-- Named queries for PostgreSQL. Parameters are :name (turned into %(name)s on load).
-- "Now" is the database clock unless a clock was injected (:now is then not null), so
-- clock skew between machines can neither run jobs early nor strand them.

-- name: insert
INSERT INTO tickq_jobs (type, queue, payload, priority, max_attempts, run_after,
                        unique_key, unique_scope, meta, created_at, updated_at)
VALUES (:type, :queue, CAST(:payload AS jsonb), :priority, :max_attempts,
        COALESCE(CAST(:run_after AS timestamptz), CAST(:now AS timestamptz), now()),
        :unique_key, :unique_scope, CAST(:meta AS jsonb),
        COALESCE(CAST(:now AS timestamptz), now()), COALESCE(CAST(:now AS timestamptz), now()))
ON CONFLICT DO NOTHING
RETURNING id

-- name: insert_many
INSERT INTO tickq_jobs (type, queue, payload, priority, max_attempts, run_after,
                        unique_key, unique_scope, meta, created_at, updated_at)
SELECT r.type, r.queue, CAST(r.payload AS jsonb), r.priority, r.max_attempts,
       COALESCE(CAST(r.run_after AS timestamptz), CAST(:now AS timestamptz), now()),
       r.unique_key, r.unique_scope, CAST(r.meta AS jsonb),
       COALESCE(CAST(:now AS timestamptz), now()), COALESCE(CAST(:now AS timestamptz), now())
FROM unnest(CAST(:types AS text[]), CAST(:queues AS text[]), CAST(:payloads AS text[]),
            CAST(:priorities AS int[]), CAST(:max_attempts AS int[]),
            CAST(:run_afters AS text[]), CAST(:unique_keys AS text[]),
            CAST(:unique_scopes AS text[]), CAST(:metas AS text[]))
     WITH ORDINALITY AS r(type, queue, payload, priority, max_attempts, run_after,
                          unique_key, unique_scope, meta, ord)
ORDER BY r.ord
ON CONFLICT DO NOTHING
RETURNING id, unique_key

-- name: find_unique
SELECT id FROM tickq_jobs
WHERE unique_key = :unique_key
  AND (status IN ('pending', 'running') OR (:unique_scope = 'all' AND unique_scope = 'all'))
ORDER BY id DESC LIMIT 1

-- name: claim
WITH due AS (
    SELECT id FROM tickq_jobs
    WHERE status = 'pending' AND run_after <= COALESCE(CAST(:now AS timestamptz), now())
      AND (CAST(:queues AS text[]) IS NULL OR queue = ANY(CAST(:queues AS text[])))
    ORDER BY priority DESC, run_after, id
    LIMIT :limit
    FOR UPDATE SKIP LOCKED)
UPDATE tickq_jobs j
SET status = 'running', attempts = j.attempts + 1, lease_owner = :owner,
    lease_expires_at = COALESCE(CAST(:now AS timestamptz), now())
                       + make_interval(secs => :lease_seconds),
    attempted_at = COALESCE(CAST(:now AS timestamptz), now()),
    updated_at = COALESCE(CAST(:now AS timestamptz), now())
FROM due WHERE j.id = due.id
RETURNING {job_columns_j}

-- name: complete
UPDATE tickq_jobs j
SET status = 'done', finished_at = COALESCE(CAST(:now AS timestamptz), now()),
    updated_at = COALESCE(CAST(:now AS timestamptz), now()),
    lease_owner = NULL, lease_expires_at = NULL
FROM unnest(CAST(:ids AS bigint[]), CAST(:attempts AS int[])) AS f(id, attempt)
WHERE j.id = f.id AND j.attempts = f.attempt AND j.status = 'running'
  AND j.lease_owner = :owner
RETURNING j.id

-- name: retry_later
WITH j AS (
    UPDATE tickq_jobs
    SET status = 'pending', last_error = :error,
        run_after = COALESCE(CAST(:now AS timestamptz), now()) + make_interval(secs => :delay),
        lease_owner = NULL, lease_expires_at = NULL,
        updated_at = COALESCE(CAST(:now AS timestamptz), now())
    WHERE id = :id AND status = 'running' AND attempts = :attempt AND lease_owner = :owner
    RETURNING *),
a AS (
    INSERT INTO tickq_attempts (job_id, attempt, started_at, finished_at, outcome, error)
    SELECT id, attempts, attempted_at, updated_at, :outcome, :error FROM j
    ON CONFLICT DO NOTHING)
SELECT {job_columns} FROM j

-- name: fail
WITH j AS (
    UPDATE tickq_jobs
    SET status = 'failed', last_error = :error,
        finished_at = COALESCE(CAST(:now AS timestamptz), now()),
        updated_at = COALESCE(CAST(:now AS timestamptz), now()),
        lease_owner = NULL, lease_expires_at = NULL
    WHERE id = :id AND status = 'running' AND attempts = :attempt AND lease_owner = :owner
    RETURNING *),
a AS (
    INSERT INTO tickq_attempts (job_id, attempt, started_at, finished_at, outcome, error)
    SELECT id, attempts, attempted_at, updated_at, :outcome, :error FROM j
    ON CONFLICT DO NOTHING)
SELECT {job_columns} FROM j

-- name: cancel_running
WITH j AS (
    UPDATE tickq_jobs
    SET status = 'cancelled', last_error = :error,
        finished_at = COALESCE(CAST(:now AS timestamptz), now()),
        updated_at = COALESCE(CAST(:now AS timestamptz), now()),
        lease_owner = NULL, lease_expires_at = NULL
    WHERE id = :id AND status = 'running' AND attempts = :attempt AND lease_owner = :owner
    RETURNING *),
a AS (
    INSERT INTO tickq_attempts (job_id, attempt, started_at, finished_at, outcome, error)
    SELECT id, attempts, attempted_at, updated_at, :outcome, :error FROM j
    ON CONFLICT DO NOTHING)
SELECT {job_columns} FROM j

-- name: release
UPDATE tickq_jobs
SET status = 'pending', attempts = attempts - 1, lease_owner = NULL,
    lease_expires_at = NULL, updated_at = COALESCE(CAST(:now AS timestamptz), now())
WHERE id = :id AND status = 'running' AND attempts = :attempt AND lease_owner = :owner
RETURNING id

-- name: extend_leases
UPDATE tickq_jobs
SET lease_expires_at = COALESCE(CAST(:now AS timestamptz), now())
                       + make_interval(secs => :lease_seconds)
WHERE status = 'running' AND lease_owner = :owner AND id = ANY(CAST(:ids AS bigint[]))
RETURNING id

-- name: rescue_expired
WITH expired AS (
    SELECT id FROM tickq_jobs
    WHERE status = 'running' AND lease_expires_at < COALESCE(CAST(:now AS timestamptz), now())
    FOR UPDATE SKIP LOCKED),
j AS (
    UPDATE tickq_jobs t
    SET status = CASE WHEN t.attempts >= t.max_attempts THEN 'failed' ELSE 'pending' END,
        finished_at = CASE WHEN t.attempts >= t.max_attempts
                           THEN COALESCE(CAST(:now AS timestamptz), now()) END,
        last_error = 'LeaseExpired: attempt ' || t.attempts || ' was claimed by '
            || t.lease_owner || ' which stopped renewing its lease (crashed, killed or cut off)'
            || ' before finishing',
        run_after = COALESCE(CAST(:now AS timestamptz), now()),
        lease_owner = NULL, lease_expires_at = NULL,
        updated_at = COALESCE(CAST(:now AS timestamptz), now())
    FROM expired WHERE t.id = expired.id
    RETURNING t.*),
a AS (
    INSERT INTO tickq_attempts (job_id, attempt, started_at, finished_at, outcome, error)
    SELECT id, attempts, attempted_at, updated_at, 'lease_expired', last_error FROM j
    ON CONFLICT DO NOTHING)
SELECT {job_columns} FROM j

-- name: get
SELECT {job_columns} FROM tickq_jobs WHERE id = :id

-- name: list
SELECT {job_columns} FROM tickq_jobs
WHERE (CAST(:status AS text) IS NULL OR status = :status)
  AND (CAST(:type AS text) IS NULL OR type = :type)
  AND (CAST(:queue AS text) IS NULL OR queue = :queue)
  AND (CAST(:before_id AS bigint) IS NULL OR id < :before_id)
ORDER BY id DESC LIMIT :limit

-- name: attempts
SELECT job_id, attempt, started_at, finished_at, outcome, error
FROM tickq_attempts WHERE job_id = :id ORDER BY attempt

-- name: retry
UPDATE tickq_jobs
SET status = 'pending', run_after = COALESCE(CAST(:now AS timestamptz), now()),
    finished_at = NULL, updated_at = COALESCE(CAST(:now AS timestamptz), now()),
    max_attempts = GREATEST(max_attempts, attempts + 1)
WHERE id = :id AND status IN ('failed', 'cancelled')
RETURNING {job_columns}

-- name: cancel
UPDATE tickq_jobs
SET status = 'cancelled', finished_at = COALESCE(CAST(:now AS timestamptz), now()),
    updated_at = COALESCE(CAST(:now AS timestamptz), now()),
    lease_owner = NULL, lease_expires_at = NULL
WHERE id = :id AND status IN ('pending', 'running')
RETURNING {job_columns}

-- name: prune
WITH doomed AS (
    SELECT id FROM tickq_jobs
    WHERE finished_at < :cutoff AND status IN ('done', 'failed', 'cancelled')
    LIMIT :batch),
d AS (DELETE FROM tickq_jobs WHERE id IN (SELECT id FROM doomed) RETURNING id),
a AS (DELETE FROM tickq_attempts WHERE job_id IN (SELECT id FROM d))
SELECT id FROM d

-- name: counts
SELECT queue, status, type, count(*) FROM tickq_jobs GROUP BY queue, status, type

-- name: due_summary
SELECT count(*), min(run_after) FROM tickq_jobs
WHERE status = 'pending' AND run_after <= COALESCE(CAST(:now AS timestamptz), now())

-- name: next_due
SELECT min(run_after) FROM tickq_jobs WHERE status = 'pending'

-- name: failed_since
SELECT count(*) FROM tickq_jobs WHERE status = 'failed' AND finished_at >= :since

-- name: db_now
SELECT now()
