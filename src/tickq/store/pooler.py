"""Which connection pooler sits between tickq and PostgreSQL, and what that allows.

A *transaction* pooler (pgbouncer ``pool_mode=transaction``; Supabase's port 6543, Neon's
``-pooler`` hosts, most serverless poolers) hands each transaction to whichever server
connection is free. Behind one, prepared statements (kept per server connection) go
missing or clash, and LISTEN hears nothing. tickq then prepares no statements, takes
only transaction-scoped advisory locks, sends NOTIFY from inside the enqueue's
transaction, and leaves LISTEN to a direct connection (``listen_url``) or polls.

Say which with ``?pooler=transaction`` (or ``session``, ``none``) on the database URL;
left out, tickq recognises the hosted poolers named above by their address, and switches
to transaction mode by itself the first time the server reports a lost prepared statement.
"""

from __future__ import annotations

from urllib.parse import unquote, urlsplit, urlunsplit

from ..errors import ConfigurationError

MODES = ("transaction", "session", "none")


def split_pooler(url: str) -> tuple[str, str | None]:
    """The URL without tickq's ``pooler=`` option, and that option (None when absent)."""
    parts = urlsplit(url)
    pairs = parts.query.split("&") if parts.query else []
    given = [unquote(p.partition("=")[2]) for p in pairs if p.partition("=")[0] == "pooler"]
    if not given:
        return url, None
    mode = given[-1].strip().lower()
    if mode not in MODES:
        raise ConfigurationError(
            f"pooler must be one of {', '.join(MODES)} in the database URL, got {given[-1]!r}"
        )
    rest = "&".join(p for p in pairs if p.partition("=")[0] != "pooler")  # the rest as given
    return urlunsplit(parts._replace(query=rest)), mode


def guess_pooler(url: str) -> str:
    """``transaction`` for the hosted transaction poolers known by their address."""
    parts = urlsplit(url)
    host = (parts.hostname or "").lower()
    try:
        port = parts.port
    except ValueError:
        port = None
    if host.endswith(".pooler.supabase.com") and port == 6543:
        return "transaction"
    if host.split(".")[0].endswith("-pooler") and host.endswith(".neon.tech"):
        return "transaction"
    return "none"
