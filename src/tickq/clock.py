"""Time, injectable so tests never sleep. Every time tickq stores is aware UTC."""

from __future__ import annotations

import os
import time
from datetime import UTC, datetime, timedelta

TYPE_CHECKING = False  # typing costs a waking host milliseconds of import; checkers see True
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Protocol

    class Clock(Protocol):
        """Anything with a ``now()`` returning an aware UTC datetime. A ``monotonic()``
        (seconds, never going back) is optional: time budgets and the worker's pacing read
        it, falling back to ``time.monotonic``. So is ``monotonic_domain`` (see
        ``monotonic_domain_of``)."""

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

    @property
    def monotonic_domain(self) -> str | None:
        """The host's monotonic clock, which every process on it shares (see
        ``monotonic_domain_of``)."""
        return system_domain()


class FrozenClock:
    """A clock that only moves when told to: ``clock.advance(minutes=5)``.

    Its ``monotonic()`` reading moves with it (time budgets read it), but never back:
    ``set()`` to an earlier time leaves it where it is.
    """

    def __init__(self, start: datetime | None = None) -> None:
        self._now = require_aware(start, "start") if start else datetime.now(UTC)
        self._monotonic = 0.0
        self.monotonic_domain = f"frozen:{os.urandom(8).hex()}"
        """Only this clock's own readings compare with its ``monotonic()``."""

    def now(self) -> datetime:
        """The time this clock is at (aware UTC)."""
        return self._now

    def monotonic(self) -> float:
        """Seconds advanced since this clock was made."""
        return self._monotonic

    def advance(self, delta: timedelta | None = None, **kwargs: float) -> datetime:
        """Move on by ``delta`` or by ``timedelta(**kwargs)``; returns the new time."""
        step = delta if delta is not None else timedelta(**kwargs)
        self._now += step
        self._monotonic += max(0.0, step.total_seconds())
        return self._now

    def set(self, when: datetime) -> None:
        """Jump to ``when`` (an aware datetime), forward or back."""
        when = require_aware(when, "when")
        self._monotonic += max(0.0, (when - self._now).total_seconds())
        self._now = when


def monotonic_of(clock: object) -> Callable[[], float]:
    """``clock.monotonic``, or ``time.monotonic`` for a clock that has only ``now()``."""
    reading = getattr(clock, "monotonic", None)
    return reading if callable(reading) else time.monotonic


def monotonic_domain_of(clock: object) -> str | None:
    """Which processes' ``monotonic()`` readings can be compared with ``clock``'s: those
    whose clocks name the same domain. ``SystemClock`` (and a clock with only ``now()``,
    which falls back to ``time.monotonic``) names the host's boot, because on Linux
    ``CLOCK_MONOTONIC`` is one clock for every process until the next reboot, and no
    wall-clock step or skew moves it; SQLite's leases are measured on it. None: unknown
    (SQLite's leases then run out by the wall clock)."""
    if getattr(clock, "monotonic", None) is None:
        return system_domain()
    domain = getattr(clock, "monotonic_domain", None)
    return domain if isinstance(domain, str) else None


_BOOT: list[str | None] = []


def system_domain() -> str | None:
    """``boot:<id>`` of this boot of the host (Linux), or None where it can't be read."""
    if not _BOOT:
        try:
            with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as f:
                _BOOT.append(f"boot:{f.read().strip()}")
        except OSError:
            _BOOT.append(None)
    return _BOOT[0]


def require_aware(value: datetime, name: str) -> datetime:
    """Return ``value`` in UTC, refusing naive datetimes (their zone is a guess)."""
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError(
            f"{name} must be timezone-aware, got naive {value.isoformat()}; "
            "use datetime.now(timezone.utc) or attach the user's ZoneInfo"
        )
    return value.astimezone(UTC)
