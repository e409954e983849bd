"""How the calls stretch each job type's retries (pure).

A failed attempt asks for a retry after its backoff delay, but on a host that sleeps the
retry runs only when a call comes: with ticks every 15 minutes a 60-second retry waits up
to 15 minutes. Attempts are taken to start at a call (where a tick runs them).
"""

from __future__ import annotations

import math
from bisect import bisect_left
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from .cronlines import DAY_MINUTES, CronLines
from .needs import CronNeed, EveryNeed, Need

if TYPE_CHECKING:
    from ..registry import JobDefinition


@dataclass(frozen=True)
class Retries:
    """One job type's retry delays: as its backoff says, and as the calls make them."""

    job: str
    max_attempts: int
    nominal: tuple[float, ...]
    """Seconds the backoff asks for before attempt 2, 3, ..."""
    effective: tuple[float, ...]
    """Seconds before each retry actually runs, at most."""
    jitter: bool
    """The backoff is random: ``nominal`` shows one draw."""

    def to_dict(self) -> dict[str, object]:
        return {
            "job": self.job,
            "max_attempts": self.max_attempts,
            "nominal_seconds": list(self.nominal),
            "effective_seconds": list(self.effective),
            "jitter": self.jitter,
            "last_attempt_after_seconds": sum(self.effective),
        }


def nominal_delays(definition: JobDefinition) -> tuple[tuple[float, ...], bool]:
    """The backoff's delays until it stops or attempts run out, and whether it is random."""
    delays: list[float] = []
    jitter = False
    for attempt in range(1, definition.max_attempts):
        delay = definition.backoff(attempt)
        if delay is None:
            break
        jitter = jitter or definition.backoff(attempt) != delay
        delays.append(float(delay))
    return tuple(delays), jitter


def grid_retries(definition: JobDefinition, interval: int) -> Retries:
    """Each retry waits for the first tick at or after its delay (at least the next one)."""
    nominal, jitter = nominal_delays(definition)
    size = interval * 60
    effective = tuple(max(1, math.ceil(d / size)) * size for d in nominal)
    return Retries(definition.name, definition.max_attempts, nominal, effective, jitter)


def lines_retries(
    definition: JobDefinition, lines: CronLines, needs: list[Need], year: int
) -> Retries:
    """The worst chain of calls over the slots of the schedules that run the job."""
    nominal, jitter = nominal_delays(definition)
    starts = [m for need in needs for m in start_minutes(need, definition.name, year)]
    worst = [0.0] * len(nominal)
    for start in starts:
        at = next_call(lines, start)  # the call that runs the slot's first attempt
        for i, delay in enumerate(nominal):
            call = next_call(lines, max(math.ceil(at + delay / 60), at + 1))
            worst[i] = max(worst[i], (call - at) * 60.0)
            at = call
    return Retries(definition.name, definition.max_attempts, nominal, tuple(worst), jitter)


def start_minutes(need: Need, job: str, year: int) -> list[int]:
    """Minutes since the year's start at which a schedule running ``job`` starts it."""
    if isinstance(need, CronNeed) and need.schedule.job == job:
        begin = datetime(year, 1, 1, tzinfo=need.waits[0].slot.tzinfo)
        return [(w.slot - begin) // timedelta(minutes=1) for w in need.waits]
    if isinstance(need, EveryNeed) and need.schedule.job == job:
        step = max(1, need.every // timedelta(minutes=1))
        return list(range(0, DAY_MINUTES, step))
    return []


def next_call(lines: CronLines, minute: int) -> int:
    """The first call at or after ``minute`` (counted from the year's start; years repeat)."""
    year = lines.days * DAY_MINUTES
    laps, rest = divmod(minute, year)
    i = bisect_left(lines.calls, rest)
    if i == len(lines.calls):
        laps, i = laps + 1, 0
    return laps * year + lines.calls[i]
