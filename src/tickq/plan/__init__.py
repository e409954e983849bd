"""``tickq plan``: the slowest calls that meet what an app declares, and what they cost.

Every job type and schedule says how late its work may start (``max_delay=``, default 15
minutes). On a host that sleeps nothing runs between two scheduler calls, so the calls
must come often enough for all of them, and every extra call wakes and bills the app::

    from tickq.plan import make_plan

    plan = make_plan(q, awake_seconds=10, price_per_hour=0.05)
    plan.timing.cron        # what the scheduler should run, in UTC
    plan.why                # which job or schedule stops a slower grid

The plan is a grid of ticks (every N minutes, N dividing a day, at the minute that suits
the schedules best) or, when only schedules need the tick, cron lines that call just when
one is due. It is pure: reading the app's declarations, never its database.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from ..errors import ConfigurationError
from .costs import Cost, grid_cost, lines_cost
from .cronlines import DAY_MINUTES, CronLines, NoLines, cron_lines
from .grid import Grid, phases_meeting, slowest_grid, why, why_not
from .needs import INTERNAL_PREFIX, CronNeed, Need, needs_of
from .retries import Retries, grid_retries, lines_retries, next_call

if TYPE_CHECKING:
    from ..queue import Queue
    from ..schedulers.timing import Timing

__all__ = ["DEFAULT_AWAKE_SECONDS", "Plan", "make_plan", "why_not"]

DEFAULT_AWAKE_SECONDS = 10.0
"""How long one call keeps the app awake when not told: its work plus a short idle time."""
SHOWN_INTERVALS = (1, 5, 15, 30, 60)


@dataclass(frozen=True)
class Plan:
    """What ``tickq plan`` prints: see the module docstring."""

    year: int
    """The year whose every day the schedules' slots were checked on."""
    needs: tuple[Need, ...]
    grid: Grid
    """The slowest grid of ticks that meets every need."""
    why: tuple[str, ...]
    """Why not a slower grid."""
    lines: CronLines | None
    """Cron lines that call only when a schedule is due, if only schedules need ticks."""
    no_lines: str | None
    """Why there are no such lines (when there are schedules)."""
    costs: tuple[Cost, ...]
    retries: tuple[Retries, ...]
    awake_seconds: float
    price_per_hour: float | None

    @property
    def use_lines(self) -> bool:
        """Recommend the cron lines: they call less often than the grid."""
        grid_calls = self.lines.days * DAY_MINUTES // self.grid.interval if self.lines else 0
        return self.lines is not None and len(self.lines.calls) < grid_calls

    @property
    def grid_timing(self) -> Timing:
        from ..schedulers.timing import Timing

        return Timing.every(self.grid.interval, self.grid.phase)

    @property
    def timing(self) -> Timing:
        """The recommended calls as one scheduler entry (the grid when the lines are
        several: most schedulers take one expression)."""
        from ..schedulers.timing import Timing

        if self.use_lines and self.lines and len(self.lines.lines) == 1:
            return Timing.from_cron(self.lines.lines[0])
        return self.grid_timing

    def worst_wait(self, need: Need) -> timedelta:
        """How long the need's work waits at most with the recommended calls."""
        if not self.use_lines or self.lines is None:
            return need.worst(self.grid.interval, self.grid.phase)
        if not isinstance(need, CronNeed):
            return timedelta(0)  # every= schedules that cron lines can say are on them
        begin = datetime(self.year, 1, 1, tzinfo=UTC)
        worst = timedelta(0)
        for wait in need.waits:
            minute = -((begin - wait.slot) // timedelta(minutes=1))  # rounded up
            call = begin + timedelta(minutes=next_call(self.lines, minute))
            worst = max(worst, call - wait.slot)
        return worst

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready (``tickq plan --json``)."""
        lines = self.lines
        return {
            "year": self.year,
            "recommended": {
                "kind": "cron_lines" if self.use_lines else "interval",
                "cron": list(lines.lines) if self.use_lines and lines else [self.grid_timing.cron],
            },
            "interval": {
                "minutes": self.grid.interval,
                "offset_minutes": self.grid.phase,
                "cron": self.grid_timing.cron,
                "why": list(self.why),
            },
            "cron_lines": None
            if lines is None
            else {
                "lines": list(lines.lines),
                "exact": lines.exact,
                "notes": list(lines.notes),
                "calls_per_year": len(lines.calls),
                "slots_per_year": lines.slots,
            },
            "cron_lines_unavailable": self.no_lines,
            "needs": [
                {
                    "kind": need.kind,
                    "name": need.name,
                    "what": need.describe(),
                    "max_delay_seconds": need.max_delay.total_seconds(),
                    "max_delay_declared": need.declared,
                    "worst_wait_seconds": self.worst_wait(need).total_seconds(),
                }
                for need in self.needs
            ],
            "awake_seconds": self.awake_seconds,
            "price_per_hour": self.price_per_hour,
            "costs": [cost.to_dict() for cost in self.costs],
            "retries": [r.to_dict() for r in self.retries],
        }


def make_plan(
    queue: Queue,
    *,
    awake_seconds: float = DEFAULT_AWAKE_SECONDS,
    price_per_hour: float | None = None,
    year: int | None = None,
) -> Plan:
    """Plan the calls for ``queue``'s job types and schedules (checked over ``year``,
    default this one). Raises ConfigurationError when no cron schedule is fast enough."""
    if awake_seconds <= 0:
        raise ConfigurationError(f"awake_seconds must be positive, got {awake_seconds}")
    if price_per_hour is not None and price_per_hour < 0:
        raise ConfigurationError(f"price_per_hour must be >= 0, got {price_per_hour}")
    year = year or datetime.now(UTC).year
    needs = needs_of(queue, year)
    grid = slowest_grid(needs)
    if grid is None:
        raise ConfigurationError(
            f"no cron schedule is fast enough: {why(needs, None)[0]}; schedulers call at most "
            "once a minute, so raise that max_delay or run `tickq worker` on an always-on host"
        )
    lines, no_lines = None, None
    if any(need.kind == "schedule" for need in needs):
        try:
            lines = cron_lines(needs, year)
        except NoLines as exc:
            no_lines = str(exc)
    plan = Plan(year, tuple(needs), grid, tuple(why(needs, grid)), lines, no_lines, (), (),
                awake_seconds, price_per_hour)  # fmt: skip
    return replace(plan, costs=tuple(costs(plan, needs)), retries=tuple(retries(plan, queue)))


def costs(plan: Plan, needs: list[Need]) -> list[Cost]:
    rows = [
        grid_cost(
            interval,
            plan.awake_seconds,
            plan.price_per_hour,
            meets=bool(phases_meeting(needs, interval)),
            recommended=interval == plan.grid.interval and not plan.use_lines,
        )
        for interval in sorted({*SHOWN_INTERVALS, plan.grid.interval})
    ]
    if plan.lines is not None:
        rows.append(lines_cost(plan.lines, plan.awake_seconds, plan.price_per_hour,
                               recommended=plan.use_lines))  # fmt: skip
    return rows


def retries(plan: Plan, queue: Queue) -> list[Retries]:
    out = []
    for name in queue.job_names():
        definition = queue._definition(name)
        if definition is None or name.startswith(INTERNAL_PREFIX):
            continue
        if plan.use_lines and plan.lines is not None:
            out.append(lines_retries(definition, plan.lines, list(plan.needs), plan.year))
        else:
            out.append(grid_retries(definition, plan.grid.interval))
    return out
