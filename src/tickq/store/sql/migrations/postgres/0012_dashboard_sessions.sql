-- tickq schema 12 (PostgreSQL): the dashboard's logins, kept in the database so every process
-- serving it agrees (see docs/security.md). Times are seconds since 1970 from the
-- dashboard's clock.
-- (Numbers are shared between changes; each is applied once, in order.)
-- The install's random signing key (one row), made by the first dashboard that needs it.
CREATE TABLE tickq_dashboard_keys (
    name         text PRIMARY KEY,
    value        text NOT NULL,
    created_at   double precision NOT NULL
);

-- One row per logged-in browser: id is the SHA-256 of the cookie's random token (the
-- token itself is never stored); password_tag ties it to the password it logged in with,
-- so a new password ends it. Logout deletes the row; so does expiry.
CREATE TABLE tickq_dashboard_sessions (
    id           text PRIMARY KEY,
    password_tag text NOT NULL,
    created_at   double precision NOT NULL,
    expires_at   double precision NOT NULL
);
CREATE INDEX tickq_dashboard_sessions_expires ON tickq_dashboard_sessions (expires_at);

-- Login attempts being checked or failed, kept for the limiter's window: every process
-- counts the same ones.
CREATE TABLE tickq_dashboard_logins (
    id           text PRIMARY KEY,
    client       text NOT NULL,
    at           double precision NOT NULL
);
CREATE INDEX tickq_dashboard_logins_client ON tickq_dashboard_logins (client, at);
CREATE INDEX tickq_dashboard_logins_at ON tickq_dashboard_logins (at);
