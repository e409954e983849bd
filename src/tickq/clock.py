"""Time, injectable so tests never sleep. Every time tickq stores is aware UTC."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

TYPE_CHECKING = False  # typing costs a waking host milliseconds of import; checkers see True
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Protocol

    class Clock(Protocol):
        """Anything with a ``now()`` returning an aware UTC datetime. A ``monotonic()``
        (seconds, never going back) is optional: time budgets and the worker's pacing read
        it, falling back to ``time.monotonic``."""

        def now(self) -> datetime: ...

else:

    class Clock:
        """Anything with a ``now()`` returning an aware UTC datetime (a protocol)."""


class SystemClock:
    """The real clock. On Postgres the database's own clock decides what is due."""

    def now(self) -> datetime:
        return datetime.now(UTC)

    def monotonic(self) -> float:
        """Seconds that never go back, for time budgets (``time.monotonic``)."""
        return time.monotonic()


class FrozenClock:
    """A clock that only moves when told to: ``clock.advance(minutes=5)``.

    Its ``monotonic()`` reading moves with it (time budgets read it), but never back:
    ``set()`` to an earlier time leaves it where it is.
    """

    def __init__(self, start: datetime | None = None) -> None:
        self._now = require_aware(start, "start") if start else datetime.now(UTC)
        self._monotonic = 0.0

    def now(self) -> datetime:
        return self._now

    def monotonic(self) -> float:
        """Seconds advanced since this clock was made."""
        return self._monotonic

    def advance(self, delta: timedelta | None = None, **kwargs: float) -> datetime:
        step = delta if delta is not None else timedelta(**kwargs)
        self._now += step
        self._monotonic += max(0.0, step.total_seconds())
        return self._now

    def set(self, when: datetime) -> None:
        when = require_aware(when, "when")
        self._monotonic += max(0.0, (when - self._now).total_seconds())
        self._now = when


def monotonic_of(clock: object) -> Callable[[], float]:
    """``clock.monotonic``, or ``time.monotonic`` for a clock that has only ``now()``."""
    reading = getattr(clock, "monotonic", None)
    return reading if callable(reading) else time.monotonic


def require_aware(value: datetime, name: str) -> datetime:
    """Return ``value`` in UTC, refusing naive datetimes (their zone is a guess)."""
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError(
            f"{name} must be timezone-aware, got naive {value.isoformat()}; "
            "use datetime.now(timezone.utc) or attach the user's ZoneInfo"
        )
    return value.astimezone(UTC)
