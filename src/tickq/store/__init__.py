"""Stores: where jobs live. ``open_store(url)`` picks the backend from the URL scheme."""

from __future__ import annotations

from ..errors import ConfigurationError
from .base import Outcome, Recorded, ScheduleMove, SqlStore, TickState

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ..clock import Clock

__all__ = ["Outcome", "Recorded", "ScheduleMove", "SqlStore", "TickState", "open_store"]


def open_store(url: str, clock: Clock | None = None) -> SqlStore:
    """A store for ``sqlite:///path.db`` or ``postgresql://user@host:5432/db``."""
    scheme = url.partition("://")[0].lower() if "://" in url else ""
    if scheme == "sqlite":
        from .sqlite import SQLiteStore

        return SQLiteStore(url, clock)
    if scheme in ("postgresql", "postgres") or scheme.startswith("postgresql+"):
        from .postgres import PostgresStore

        return PostgresStore(url, clock)
    shown = url.split("@")[-1] if "@" in url else url
    raise ConfigurationError(
        f"unsupported database URL {shown!r}: expected sqlite:///path.db or "
        "postgresql://user@host:5432/dbname"
    )
