"""Stores: where jobs live. ``open_store(url)`` picks the backend from the URL scheme."""

from __future__ import annotations

from ..errors import ConfigurationError
from .base import CANCEL_NOTE, SqlStore
from .records import RECORDED_FIELDS, Outcome, Recorded, ScheduleMove, TickState

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ..clock import Clock
    from .protocol import Store

SCHEME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789+.-")

__all__ = [
    "CANCEL_NOTE", "RECORDED_FIELDS", "Outcome", "Recorded", "ScheduleMove", "SqlStore", "Store",
    "TickState", "open_store",
]  # fmt: skip


def open_store(url: str, clock: Clock | None = None) -> SqlStore:
    """A store for ``sqlite:///path.db`` or ``postgresql://user@host:5432/db``."""
    scheme = url.partition("://")[0].lower() if "://" in url else ""
    if scheme == "sqlite":
        from .sqlite import SQLiteStore

        return SQLiteStore(url, clock)
    if scheme in ("postgresql", "postgres") or scheme.startswith("postgresql+"):
        from .postgres import PostgresStore

        return PostgresStore(url, clock)
    expected = "expected sqlite:///path.db or postgresql://user@host:5432/dbname"
    if scheme[:1].isalpha() and len(scheme) <= 30 and set(scheme) <= SCHEME_CHARS:
        raise ConfigurationError(f"unsupported database URL scheme {scheme!r}: {expected}")
    from ..redact import redact_text, redact_url

    hint = (
        f" (did you mean 'sqlite:///{redact_url(url)}'?)"
        if url.endswith((".db", ".sqlite"))
        else ""
    )
    if "=" in url and "://" not in url:
        hint = " (a libpq key/value string like 'host=h dbname=x'? write it as a URL)"
    # A bare word may be a password pasted in the wrong place: show only URL- or path-likes.
    shown = f"({len(url)} characters)"
    if set(url) & set("/.@"):
        shown = repr(redact_text(redact_url(url)))
    raise ConfigurationError(f"database URL {shown} has no valid scheme{hint}: {expected}")


def __getattr__(name: str) -> object:
    if name == "Store":  # typing costs a waking host milliseconds: loaded on first use
        from .protocol import Store

        return Store
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
