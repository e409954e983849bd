-- tickq schema 19 (SQLite): limits per key, @q.job(concurrency_key=...) (see
-- docs/controls.md). Claims of types without a key run the statements they ran before.
-- The key a keyed type's limits apply to, computed at enqueue; NULL for every other job.
-- Two partial indexes hold keyed jobs only, so a job without a key pays nothing for them.
ALTER TABLE tickq_jobs ADD COLUMN concurrency_key TEXT;
-- A keyed type's pending jobs by key, in claim order within each key: the claim steps
-- from one key to the next through it (min over "key > previous") and takes each head.
CREATE INDEX tickq_jobs_keyed ON tickq_jobs (type, concurrency_key, priority DESC, run_after, id)
    WHERE status = 'pending' AND concurrency_key IS NOT NULL;
-- A keyed type's running jobs by key and lease: the claim counts one key's live ones.
CREATE INDEX tickq_jobs_keyed_running ON tickq_jobs (type, concurrency_key, lease_expires_at)
    WHERE status = 'running' AND concurrency_key IS NOT NULL;
-- keyed: 1 when the type's limits hold per concurrency key, not for the whole type.
ALTER TABLE tickq_limits ADD COLUMN keyed INTEGER NOT NULL DEFAULT 0;
-- key: the start's concurrency key (a keyed type's rate limit counts per key).
ALTER TABLE tickq_starts ADD COLUMN key TEXT;
CREATE INDEX tickq_starts_key ON tickq_starts (type, key, at) WHERE key IS NOT NULL;
-- Where the last claim of a keyed type stopped among its keys (NULL: at the first).
CREATE TABLE tickq_key_cursors (
    type TEXT PRIMARY KEY,
    key  TEXT
);
