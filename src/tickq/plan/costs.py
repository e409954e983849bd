"""What a schedule of calls costs on a host that sleeps: wake-ups and awake time (pure).

Each call wakes the app, which then stays up ``awake_seconds`` (its work plus the host's
idle time before it sleeps again). Calls closer together than that overlap: the app is
simply awake between them, so awake time never exceeds the time that passes.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import pairwise

from .cronlines import DAY_MINUTES, CronLines

MONTH_DAYS = 30
"""A month, for the table: 30 days."""


@dataclass(frozen=True)
class Cost:
    """One row of the table."""

    label: str
    interval: int | None
    """Minutes between ticks, or None for cron lines."""
    meets: bool
    recommended: bool
    per_day: float
    per_month: float
    awake_hours: float
    """Hours awake per month."""
    cost: float | None
    """``awake_hours * price_per_hour``, or None without a price."""

    def to_dict(self) -> dict[str, object]:
        return {
            "label": self.label,
            "interval_minutes": self.interval,
            "meets_needs": self.meets,
            "recommended": self.recommended,
            "wakeups_per_day": self.per_day,
            "wakeups_per_month": self.per_month,
            "awake_hours_per_month": round(self.awake_hours, 6),
            "cost_per_month": None if self.cost is None else round(self.cost, 6),
        }


def grid_cost(
    interval: int,
    awake_seconds: float,
    price_per_hour: float | None,
    *,
    meets: bool,
    recommended: bool,
) -> Cost:
    """Ticks every ``interval`` minutes."""
    per_day = DAY_MINUTES / interval
    awake_per_day = per_day * min(awake_seconds, interval * 60)
    return priced(f"every {label(interval)}", interval, meets, recommended, per_day,
                  awake_per_day, price_per_hour)  # fmt: skip


def lines_cost(
    lines: CronLines, awake_seconds: float, price_per_hour: float | None, *, recommended: bool
) -> Cost:
    """The cron lines' calls through their year (the last call's gap runs to the next
    year's first)."""
    calls, year = lines.calls, lines.days * DAY_MINUTES
    gaps = [b - a for a, b in pairwise(calls)]
    gaps.append(calls[0] + year - calls[-1])
    awake = sum(min(awake_seconds, gap * 60) for gap in gaps)
    return priced("cron lines", None, True, recommended, len(calls) / lines.days,
                  awake / lines.days, price_per_hour)  # fmt: skip


def priced(
    text: str,
    interval: int | None,
    meets: bool,
    recommended: bool,
    per_day: float,
    awake_per_day: float,
    price_per_hour: float | None,
) -> Cost:
    awake_hours = awake_per_day * MONTH_DAYS / 3600
    cost = awake_hours * price_per_hour if price_per_hour is not None else None
    return Cost(text, interval, meets, recommended, per_day, per_day * MONTH_DAYS,
                awake_hours, cost)  # fmt: skip


def label(interval: int) -> str:
    if interval % 60:
        return f"{interval} min"
    hours = interval // 60
    return "1 hour" if hours == 1 else ("1 day" if hours == 24 else f"{hours} hours")
