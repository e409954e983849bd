-- tickq schema 16 (PostgreSQL): signed scheduler calls already accepted (Upstash QStash's
-- JWT ids), kept until their token expires, so a captured call replayed is refused.
CREATE TABLE tickq_tokens_seen (
    jti        text PRIMARY KEY,
    expires_at double precision NOT NULL  -- epoch seconds: the token's exp
);
CREATE INDEX tickq_tokens_seen_expiry ON tickq_tokens_seen (expires_at);
