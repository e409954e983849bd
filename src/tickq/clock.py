"""Time, injectable so tests never sleep. Every time tickq stores is aware UTC."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

TYPE_CHECKING = False  # typing costs a waking host milliseconds of import; checkers see True
if TYPE_CHECKING:
    from typing import Protocol

    class Clock(Protocol):
        """Anything with a ``now()`` returning an aware UTC datetime."""

        def now(self) -> datetime: ...

else:

    class Clock:
        """Anything with a ``now()`` returning an aware UTC datetime (a protocol)."""


class SystemClock:
    """The real clock. On Postgres the database's own clock decides what is due."""

    def now(self) -> datetime:
        return datetime.now(UTC)


class FrozenClock:
    """A clock that only moves when told to: ``clock.advance(minutes=5)``."""

    def __init__(self, start: datetime | None = None) -> None:
        self._now = require_aware(start, "start") if start else datetime.now(UTC)

    def now(self) -> datetime:
        return self._now

    def advance(self, delta: timedelta | None = None, **kwargs: float) -> datetime:
        self._now += delta if delta is not None else timedelta(**kwargs)
        return self._now

    def set(self, when: datetime) -> None:
        self._now = require_aware(when, "when")


def require_aware(value: datetime, name: str) -> datetime:
    """Return ``value`` in UTC, refusing naive datetimes (their zone is a guess)."""
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError(
            f"{name} must be timezone-aware, got naive {value.isoformat()}; "
            "use datetime.now(timezone.utc) or attach the user's ZoneInfo"
        )
    return value.astimezone(UTC)
