-- tickq schema 16 (SQLite): signed scheduler calls already accepted (Upstash QStash's JWT
-- ids), kept until their token expires, so a captured call replayed is refused.
CREATE TABLE tickq_tokens_seen (
    jti        TEXT PRIMARY KEY,
    expires_at REAL NOT NULL  -- epoch seconds: the token's exp
);
CREATE INDEX tickq_tokens_seen_expiry ON tickq_tokens_seen (expires_at);
