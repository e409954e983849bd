"""When a scheduler calls the tick: an interval (``--every 15m``) or a cron expression.

An interval becomes a cron expression whose minutes sit off the top of the hour, because
shared schedulers (GitHub Actions above all) are busiest, and late, at minute 0.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from ..errors import ConfigurationError

OFFSET_MINUTE = 7
UNITS = {"m": 1, "min": 1, "h": 60, "d": 1440}
EVERY = re.compile(r"\s*(\d+)\s*(m|min|h|d)\s*", re.IGNORECASE)
EVEN_MINUTES = tuple(m for m in range(1, 60) if 60 % m == 0)
EVEN_HOURS = tuple(h for h in range(1, 24) if 24 % h == 0)
DAY, WEEK = 1440, 10080
# Far enough to see every gap of any schedule a tick uses (weekly included), fast to walk.
GAP_HORIZON = timedelta(days=60)
GAP_BASE = datetime(2024, 1, 1, tzinfo=UTC)


@dataclass(frozen=True)
class Timing:
    """A schedule in UTC: its 5-field cron expression and, for intervals, the minutes."""

    cron: str
    minutes: int | None = None

    @classmethod
    def every(cls, minutes: int, offset: int = OFFSET_MINUTE) -> Timing:
        """Every ``minutes`` minutes, evenly, ``offset`` minutes after midnight UTC and then
        each interval (by default minute 7, off the top of the hour; ``tickq plan`` may pick
        another offset so that ticks land on its schedules' slots)."""
        return cls(cron=interval_cron(minutes, offset), minutes=minutes)

    @classmethod
    def parse_every(cls, text: str) -> Timing:
        """``15m``, ``1h``, ``1d`` ... as given to ``--every``."""
        match = EVERY.fullmatch(text)
        if not match:
            raise ConfigurationError(
                f"--every {text!r} is not an interval: write a number and a unit, "
                "e.g. 15m, 2h or 1d (seconds are finer than any cron scheduler)"
            )
        return cls.every(int(match[1]) * UNITS[match[2].lower()])

    @classmethod
    def from_cron(cls, expr: str) -> Timing:
        """A 5-field cron expression, checked by a cron library."""
        fields = expr.split()
        if len(fields) != 5:
            raise ConfigurationError(
                f"--cron {expr!r} has {len(fields)} fields; schedulers take 5: "
                "minute hour day-of-month month day-of-week, e.g. '7,37 * * * *'"
            )
        parsed(" ".join(fields))
        return cls(cron=" ".join(fields))

    def shortest_gap(self) -> timedelta:
        """The shortest time between two consecutive runs."""
        if self.minutes is not None:
            return timedelta(minutes=self.minutes)
        runs = parsed(self.cron)
        previous, gap = next(runs), timedelta.max
        for run in runs:
            gap = min(gap, run - previous)
            if run - GAP_BASE > GAP_HORIZON:
                break
            previous = run
        return gap

    def describe(self) -> str:
        """Words for comments: ``every 15 minutes`` or ``on the cron schedule '...'``."""
        if self.minutes is None:
            return f"on the cron schedule '{self.cron}'"
        return f"every {duration(self.minutes)}"

    def fires_on_the_hour(self) -> bool:
        """True when a run falls on minute 0, the busiest minute of shared schedulers."""
        return 0 in parsed(self.cron).minutes


def interval_cron(minutes: int, offset: int = OFFSET_MINUTE) -> str:
    """The cron expression that fires every ``minutes`` minutes with equal gaps, the first
    ``offset`` minutes after midnight UTC (taken modulo the interval)."""
    if minutes == 1:
        return "* * * * *"
    if minutes in EVEN_MINUTES:
        first = offset % minutes
        return ",".join(str(m) for m in range(first, 60, minutes)) + " * * * *"
    if minutes % 60 == 0 and minutes // 60 in EVEN_HOURS:
        hours, (first_hour, minute) = minutes // 60, divmod(offset % minutes, 60)
        if hours == 1:
            return f"{minute} * * * *"
        return f"{minute} {f'{first_hour}-23' if first_hour else '*'}/{hours} * * *"
    if minutes == DAY:
        hour, minute = divmod(offset % DAY, 60)
        return f"{minute} {hour} * * *"
    if minutes == WEEK:
        return f"{offset % 60} 0 * * 1"
    raise ConfigurationError(
        f"every {duration(minutes)} can't be written as a cron schedule with equal gaps: "
        f"use {', '.join(map(str, EVEN_MINUTES))} minutes (e.g. 15m), "
        f"{', '.join(map(str, EVEN_HOURS))} hours (e.g. 2h), 1d or 7d, or give --cron EXPR"
    )


def duration(minutes: int) -> str:
    for unit, size in (("week", WEEK), ("day", DAY), ("hour", 60)):
        if minutes % size == 0:
            count = minutes // size
            return f"{count} {unit}s" if count > 1 else unit
    return f"{minutes} minutes" if minutes > 1 else "minute"


def parsed(cron: str):  # type: ignore[no-untyped-def]
    """A cronsim iterator over ``cron`` in UTC (cronsim is imported only when needed)."""
    from cronsim import CronSim, CronSimError

    from ..schedule import step_problem

    try:
        sim = CronSim(cron, GAP_BASE)
    except CronSimError as exc:
        raise ConfigurationError(f"--cron {cron!r} is not a valid cron expression: {exc}") from None
    if problem := step_problem(cron):
        raise ConfigurationError(f"--cron {cron!r} is not a valid cron expression: {problem}")
    return sim
