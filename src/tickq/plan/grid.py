"""The slowest tick grid that meets every need, and which need stops a slower one (pure)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from ..schedulers.timing import DAY, EVEN_HOURS, EVEN_MINUTES, OFFSET_MINUTE
from .needs import Need, names, span

CANDIDATES: tuple[int, ...] = tuple(
    sorted({*EVEN_MINUTES, *(h * 60 for h in EVEN_HOURS), DAY}, reverse=True)
)
"""Intervals in minutes that repeat evenly in cron, slowest first: every day, 12 hours, ...
1 minute. Each divides a day, so the ticks sit at the same times every day."""


@dataclass(frozen=True)
class Grid:
    """Ticks every ``interval`` minutes, the first ``phase`` minutes after midnight UTC."""

    interval: int
    phase: int


def phases_meeting(needs: list[Need], interval: int) -> set[int]:
    """The phases at which ticks every ``interval`` minutes meet every need."""
    phases = set(range(interval))
    for need in needs:
        phases = need.allowed(interval, phases)
        if not phases:
            break
    return phases


def slowest_grid(needs: list[Need]) -> Grid | None:
    """The slowest candidate interval (and its best phase) that meets every need."""
    for interval in CANDIDATES:
        if phases := phases_meeting(needs, interval):
            return Grid(interval, preferred_phase(needs, interval, phases))
    return None


def preferred_phase(needs: list[Need], interval: int, phases: set[int]) -> int:
    """Ticks at minute 7 of the hour if that works (shared schedulers start runs late at
    minute 0), else the phase that leaves the most room before any max_delay."""

    def rank(phase: int) -> tuple[bool, timedelta, int]:
        on_7 = (phase - OFFSET_MINUTE) % interval == 0 if interval <= 60 else phase % 60 == 7
        room = min((n.max_delay - n.worst(interval, phase) for n in needs), default=timedelta(0))
        return (not on_7, -room, (phase - OFFSET_MINUTE) % interval)

    return min(phases, key=rank)


def why(needs: list[Need], grid: Grid | None) -> list[str]:
    """Why not slower: what goes wrong with the next slower interval (or with every one)."""
    if not needs:
        return ["nothing in the app needs the tick: no job types or schedules besides tickq's"]
    if grid is None:
        return why_not(needs, CANDIDATES[-1])
    slower = [i for i in CANDIDATES if i > grid.interval]
    if not slower:
        return ["every need is met with one tick a day, the slowest grid tickq plans"]
    return why_not(needs, slower[-1])


def why_not(needs: list[Need], interval: int) -> list[str]:
    """What goes wrong with ticks every ``interval`` minutes (empty: nothing)."""
    alone = [need for need in needs if not need.allowed(interval, set(range(interval)))]
    if alone:
        return [need.miss(interval) for need in alone]
    phases, involved = set(range(interval)), []
    for need in needs:
        narrowed = need.allowed(interval, phases)
        if narrowed != phases:
            involved.append(need)
        phases = narrowed
        if not phases:
            return [
                f"{names(involved)}: each could live with ticks every "
                f"{span_minutes(interval)}, but not at the same minutes"
            ]
    return []


def span_minutes(interval: int) -> str:
    return span(timedelta(minutes=interval))
