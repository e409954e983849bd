-- tickq schema 5 (PostgreSQL): payloads are stored as `json`, the text exactly as enqueued.
-- `jsonb` normalised what it stored: -0.0 came back as 0, 1e+16 as an integer, keys were
-- reordered and "\u0000" was refused, so a job could receive something other than what was
-- enqueued (SQLite keeps the text as is). `json` still validates the text on insert and
-- still supports ->, ->> and json_* functions in users' own queries.
ALTER TABLE tickq_jobs ALTER COLUMN payload DROP DEFAULT;
ALTER TABLE tickq_jobs ALTER COLUMN payload TYPE json USING CAST(payload AS json);
ALTER TABLE tickq_jobs ALTER COLUMN payload SET DEFAULT '{}';
