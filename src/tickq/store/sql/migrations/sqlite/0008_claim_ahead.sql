-- tickq schema 8 (SQLite): jobs a worker claims ahead of its free slots.
-- (Numbers 7 and 9 are taken by other changes; each is applied once, in order.)
-- ahead: 0 = claimed to start at once (or not claimed); 1 = claimed ahead to wait in a
-- worker's line, not yet known to have started; 2 = once given back by a rescue with its
-- attempt refunded: never claimed ahead again, so a job that kills its worker each time
-- still runs out of attempts. 1 means something only while the job is running.
ALTER TABLE tickq_jobs ADD COLUMN ahead INTEGER NOT NULL DEFAULT 0;
