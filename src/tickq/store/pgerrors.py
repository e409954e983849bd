"""Internal: what a psycopg error means, in tickq's words.

An outage of some kind is a ``DatabaseUnavailable`` whose reason says which (read-only,
disk full, too many connections, unreachable); a value too large for Postgres to store is a
``ConfigurationError`` (sending it again would fail again, so it must never read as an
outage). Told apart by SQLSTATE, and by the server's words where psycopg has none (a
refused connection carries no SQLSTATE).
"""

from __future__ import annotations

from ..errors import (
    DISK_FULL,
    READ_ONLY,
    TOO_MANY_CONNECTIONS,
    UNREACHABLE,
    ConfigurationError,
    DatabaseUnavailable,
)
from ..job_options import MAX_NAME_BYTES, MAX_UNIQUE_KEY_BYTES

READ_ONLY_STATE, DISK_FULL_STATE, TOO_MANY_STATE, TOO_LARGE_STATE = (
    "25006", "53100", "53300", "54000",
)  # fmt: skip
READ_ONLY_WORDS = ("read-only transaction", "during recovery", "recovery is in progress")
"""A hot standby's refusals ("cannot execute NOTIFY during recovery")."""
TOO_MANY_WORDS = ("too many connections", "too many clients", "remaining connection slots")
"""A refused connection's reasons (which carry no SQLSTATE)."""
ADVICE = {
    READ_ONLY: (
        "is read-only (a replica? after a failover the URL may still lead to the old "
        "primary) ({why}): point the database URL at the primary; tickq reconnects and "
        "tries again on the next call"
    ),
    DISK_FULL: (
        "is out of disk space: disk full ({why}): free space on the database server "
        "(its data or WAL disk); tickq tries again on the next call"
    ),
    TOO_MANY_CONNECTIONS: (
        "refused a connection: too many connections ({why}): raise max_connections (or the "
        "role's or database's CONNECTION LIMIT), put a pooler such as pgbouncer in front, "
        "or run fewer processes; tickq tries again on the next call"
    ),
    UNREACHABLE: (
        "is unreachable or dropped the connection ({why}); tickq reconnects on the next call"
    ),
}


def reason_of(exc: BaseException) -> str | None:
    """The kind of outage ``exc`` reports, or None when it is none of the known ones."""
    state, text = getattr(exc, "sqlstate", None), str(exc)
    if state == READ_ONLY_STATE or any(words in text for words in READ_ONLY_WORDS):
        return READ_ONLY
    if state == DISK_FULL_STATE or "No space left on device" in text:
        return DISK_FULL
    if state == TOO_MANY_STATE or any(words in text for words in TOO_MANY_WORDS):
        return TOO_MANY_CONNECTIONS
    return None


def unavailable(where: str, reason: str, why: str) -> DatabaseUnavailable:
    """The error for an outage of ``reason`` at ``where`` (host:port/db, for the log)."""
    return DatabaseUnavailable(f"PostgreSQL at {where} {ADVICE[reason].format(why=why)}", reason)


def too_large(exc: BaseException, why: str) -> ConfigurationError | None:
    """The error for a value Postgres can't store (an index row over its limit), else None."""
    if getattr(exc, "sqlstate", None) != TOO_LARGE_STATE:
        return None
    return ConfigurationError(
        f"PostgreSQL refused a value as too large to store ({why}): shorten it (a job type "
        f"or queue name holds at most {MAX_NAME_BYTES} bytes, a unique_key "
        f"{MAX_UNIQUE_KEY_BYTES}); this is not an outage, and sending it again fails again"
    )
