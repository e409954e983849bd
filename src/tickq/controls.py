"""Internal: the limits a job type may declare (``@q.job(concurrency=, rate_limit=)``),
checked once where they are declared. The database enforces them (``store``)."""

from __future__ import annotations

from .errors import ConfigurationError
from .job import Frozen

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0}
"""Rate limit periods: ``10/s``, ``100/m``, ``1000/h``."""
INT_MAX = 2**31 - 1
RATE_EXAMPLE = '"10/s", "100/m" or "1000/h" (starts per second, minute or hour)'


class Limit(Frozen):
    """A job type's limits: at most ``concurrency`` running at once and at most ``rate``
    starts within any ``per`` seconds (None: no such limit). ``text`` is the rate limit as
    declared (``"10/s"``)."""

    __slots__ = ()
    _fields = ("concurrency", "rate", "per")

    if TYPE_CHECKING:
        concurrency: int | None
        rate: int | None
        per: float | None

    def __new__(cls, concurrency: int | None, rate: int | None, per: float | None) -> Limit:
        return tuple.__new__(cls, (concurrency, rate, per))

    @property
    def rate_text(self) -> str | None:
        """The rate limit as ``"10/s"`` (None when the type has none)."""
        if self.rate is None or self.per is None:
            return None
        unit = next((u for u, s in UNITS.items() if s == self.per), None)
        return f"{self.rate}/{unit}" if unit else f"{self.rate}/{self.per:g}s"

    def describe(self) -> str:
        """``concurrency 2, rate 10/s`` for tables and logs."""
        parts = [f"concurrency {self.concurrency}"] if self.concurrency is not None else []
        parts += [f"rate {self.rate_text}"] if self.rate is not None else []
        return ", ".join(parts)


def check_concurrency_limit(value: Any) -> int | None:
    """``concurrency``: None, or how many jobs of the type may run at once (an int >= 1)."""
    if value is None:
        return None
    if type(value) is not int:
        raise ConfigurationError(
            f"concurrency must be an int (how many jobs of this type may run at once), "
            f"got {type(value).__name__}: {value!r}"
        )
    if not 1 <= value <= INT_MAX:
        raise ConfigurationError(
            f"concurrency must be at least 1 (how many jobs of this type may run at once; "
            f"pause the queue to run none), got {value}"
        )
    return value


def parse_rate_limit(value: Any) -> tuple[int, float] | None:
    """``rate_limit``: None, or ``"<count>/<unit>"`` -> (count, period in seconds)."""
    if value is None:
        return None
    if type(value) is not str:
        raise ConfigurationError(
            f"rate_limit must be a str like {RATE_EXAMPLE}, got {type(value).__name__}: {value!r}"
        )
    count, slash, unit = value.strip().partition("/")
    count, unit = count.strip(), unit.strip()
    if not (slash and count.isascii() and count.isdigit() and unit in UNITS):
        raise ConfigurationError(f"rate_limit must look like {RATE_EXAMPLE}, got {value!r}")
    if not 1 <= int(count) <= INT_MAX:
        raise ConfigurationError(
            f"rate_limit must allow at least 1 start per period (pause the queue to run "
            f"none), got {value!r}"
        )
    return int(count), UNITS[unit]


def job_limit(concurrency: Any, rate_limit: Any) -> Limit | None:
    """The ``Limit`` of ``@q.job(concurrency=, rate_limit=)``, or None when neither is set;
    raises ``ConfigurationError`` naming a bad value."""
    most = check_concurrency_limit(concurrency)
    rate = parse_rate_limit(rate_limit)
    if most is None and rate is None:
        return None
    return Limit(most, *(rate or (None, None)))
