"""What needs the tick, and how late each thing may start (pure).

Ticks run on a grid in UTC: every ``interval`` minutes, ``phase`` minutes after midnight
(the interval divides a day, so every day has the same grid). Each *need* answers, for an
interval, which phases keep it, and how long it waits at most with a given phase:

- a triggered job type may be enqueued just after a tick, so it waits a whole interval;
- a schedule's slot runs at the first tick at or after it, so it waits from the slot to
  that tick, which depends on where the slot falls on the grid: ``0 9 * * *`` with ticks
  at :00, :15, :30, :45 waits nothing. Cron slots are sampled exactly over a whole year in
  the schedule's own zone (clock changes included), ``every=`` intervals are periodic;
- with ``catch_up="latest"`` a tick runs only the newest of the slots it finds, so a slot
  also has to be reached before the next one comes due, or it is skipped (``"all"``: before
  ``max_catch_up`` more come due).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta
from math import gcd
from typing import TYPE_CHECKING, Protocol

from ..schedule import ScheduleDefinition

if TYPE_CHECKING:
    from zoneinfo import ZoneInfo

    from cronsim import CronSim

    from ..queue import Queue

US = 1_000_000
MINUTE_US = 60 * US
INTERNAL_PREFIX = "tickq."
"""tickq's own job types (alert composition and delivery) ride on whatever tick there is."""
TICK = timedelta(microseconds=1)


class Need(Protocol):
    @property
    def kind(self) -> str: ...
    @property
    def name(self) -> str: ...
    @property
    def max_delay(self) -> timedelta: ...
    @property
    def declared(self) -> bool: ...

    def describe(self) -> str: ...
    def allowed(self, interval: int, phases: set[int]) -> set[int]: ...
    def worst(self, interval: int, phase: int) -> timedelta: ...
    def miss(self, interval: int) -> str: ...


@dataclass(frozen=True)
class TriggeredNeed:
    """A job type the app enqueues: it may wait a whole interval for the next tick."""

    name: str
    max_delay: timedelta
    declared: bool
    kind: str = "job"

    def describe(self) -> str:
        return "enqueued by the app"

    def allowed(self, interval: int, phases: set[int]) -> set[int]:
        return phases if timedelta(minutes=interval) <= self.max_delay else set()

    def worst(self, interval: int, phase: int) -> timedelta:
        return timedelta(minutes=interval)

    def miss(self, interval: int) -> str:
        return (
            f"job {self.name!r} may be enqueued just after a tick and wait "
            f"{span(timedelta(minutes=interval))} for the next one, more than its max_delay "
            f"{span(self.max_delay)}"
        )


@dataclass(frozen=True, slots=True)
class Wait:
    """One slot of a schedule and how long after it its tick may come."""

    slot: datetime
    limit: timedelta
    next_slot: datetime | None
    """The slot that replaces this one if the tick comes at or after it (catch-up), when
    that is sooner than ``max_delay`` allows."""

    @property
    def residue(self) -> int:
        """Microseconds since midnight UTC."""
        t = self.slot
        return ((t.hour * 60 + t.minute) * 60 + t.second) * US + t.microsecond


@dataclass(frozen=True)
class ScheduleNeed:
    """What every schedule's need says of itself: its name and how late it may run."""

    schedule: ScheduleDefinition

    @property
    def name(self) -> str:
        return self.schedule.name

    @property
    def max_delay(self) -> timedelta:
        return self.schedule.effective_max_delay

    @property
    def declared(self) -> bool:
        return self.schedule.max_delay is not None


@dataclass(frozen=True)
class CronNeed(ScheduleNeed):
    """A cron schedule, by the slots it has over a whole year (``waits``)."""

    waits: tuple[Wait, ...]
    offsets: frozenset[timedelta]
    """The UTC offsets its slots fall in: two for a zone that changes its clocks."""
    slots_per_year: int
    kind: str = "schedule"
    _limits: dict[int, dict[int, Wait]] = field(default_factory=dict, repr=False, compare=False)

    def describe(self) -> str:
        return self.schedule.describe()

    def limits(self, interval: int) -> dict[int, Wait]:
        """Per residue on the grid, the wait that allows the least."""
        if interval not in self._limits:
            size = interval * MINUTE_US
            tightest: dict[int, Wait] = {}
            for wait in self.waits:
                r = wait.residue % size
                if r not in tightest or wait.limit < tightest[r].limit:
                    tightest[r] = wait
            self._limits[interval] = tightest
        return self._limits[interval]

    def allowed(self, interval: int, phases: set[int]) -> set[int]:
        size = interval * MINUTE_US
        for r, wait in sorted(self.limits(interval).items(), key=lambda kv: kv[1].limit):
            limit = us(wait.limit)
            phases = {p for p in phases if (p * MINUTE_US - r) % size <= limit}
            if not phases:
                break
        return phases

    def worst(self, interval: int, phase: int) -> timedelta:
        size = interval * MINUTE_US
        longest = max(((phase * MINUTE_US - r) % size for r in self.limits(interval)), default=0)
        return timedelta(microseconds=longest)

    def miss(self, interval: int) -> str:
        size, tightest = interval * MINUTE_US, self.limits(interval)
        limits = [(r, us(w.limit)) for r, w in tightest.items()]

        def over(phase: int) -> tuple[int, int]:
            """How far past its limit the worst slot is with this phase, and its residue."""
            return max(((phase * MINUTE_US - r) % size - limit, r) for r, limit in limits)

        best = min(range(interval), key=over)
        r = over(best)[1]
        wait, delay = tightest[r], timedelta(microseconds=(best * MINUTE_US - r) % size)
        at = self.local_time(wait.slot)
        if wait.next_slot is not None and delay > wait.limit:
            return (
                f"schedule {self.name!r} ({self.describe()}) with ticks every "
                f"{span(timedelta(minutes=interval))}: at best its {at} slot would be skipped, "
                f"because its {self.local_time(wait.next_slot)} slot comes due before the "
                f"tick and {self.catch_up_rule()}"
            )
        return (
            f"schedule {self.name!r} ({self.describe()}) with ticks every "
            f"{span(timedelta(minutes=interval))}: at best its {at} slot would wait "
            f"{span(delay)}, more than its max_delay {span(self.max_delay)}"
        )

    def catch_up_rule(self) -> str:
        if self.schedule.catch_up == "latest":
            return "catch_up='latest' runs only the newest"
        return f"a tick runs only the newest {self.schedule.max_catch_up} (max_catch_up)"

    def local_time(self, slot: datetime) -> str:
        text = f"{slot:%H:%M} UTC"
        if self.schedule.tz == "UTC":
            return text
        return f"{text} ({slot.astimezone(self.schedule.zone):%H:%M} {self.schedule.tz})"


@dataclass(frozen=True)
class EveryNeed(ScheduleNeed):
    """An ``every=`` schedule: slots at multiples of ``every`` since 1970-01-01 UTC."""

    kind: str = "schedule"

    @property
    def every(self) -> timedelta:
        assert self.schedule.every is not None
        return self.schedule.every

    def describe(self) -> str:
        return f"every {span(self.every)}"

    @property
    def limit(self) -> int:
        keep = 1 if self.schedule.catch_up == "latest" else self.schedule.max_catch_up
        return min(us(self.max_delay), keep * us(self.every) - 1)

    def worst_us(self, interval: int, phase: int) -> int:
        # Slots fall on every multiple of g = gcd(every, interval) on the grid, so the one
        # just after a tick waits the whole interval less g, plus the phase's offset from g.
        size = interval * MINUTE_US
        step = gcd(us(self.every), size)
        return (phase * MINUTE_US) % step + size - step

    def allowed(self, interval: int, phases: set[int]) -> set[int]:
        return {p for p in phases if self.worst_us(interval, p) <= self.limit}

    def worst(self, interval: int, phase: int) -> timedelta:
        return timedelta(microseconds=self.worst_us(interval, phase))

    def miss(self, interval: int) -> str:
        worst = self.worst_us(interval, 0)
        if worst > us(self.max_delay):
            return (
                f"schedule {self.name!r} ({self.describe()}) with ticks every "
                f"{span(timedelta(minutes=interval))}: some slot would wait "
                f"{span(timedelta(microseconds=worst))}, more than its max_delay "
                f"{span(self.max_delay)}"
            )
        return (
            f"schedule {self.name!r} ({self.describe()}) with ticks every "
            f"{span(timedelta(minutes=interval))}: slots would be skipped, because more come "
            "due between two ticks than its catch_up keeps"
        )


def needs_of(queue: Queue, year: int) -> list[Need]:
    """Every need the app declares: triggered job types first, then schedules."""
    scheduled = {s.job for s in queue._schedules.values()}
    needs: list[Need] = [
        TriggeredNeed(d.name, d.effective_max_delay, d.max_delay is not None)
        for d in map(queue._definition, queue.job_names())
        if d is not None
        and not d.name.startswith(INTERNAL_PREFIX)
        and (d.name not in scheduled or d.max_delay is not None)
    ]
    for schedule in queue._schedules.values():
        needs.append(EveryNeed(schedule) if schedule.every else cron_need(schedule, year))
    return needs


def cron_need(schedule: ScheduleDefinition, year: int) -> CronNeed:
    """Sample the slots of the first year from ``year`` in which the schedule fires at all
    (``0 9 29 2 *`` waits for a leap year)."""
    for y in range(year, year + 8):
        groups = day_groups(schedule, y)
        if groups:
            break
    waits: list[Wait] = []
    offsets: set[timedelta] = set()
    count = 0
    for day, size in groups:
        in_day = day_waits(schedule, day)
        waits += in_day
        count += size * len(in_day)
        offsets |= {offset_at(w.slot, schedule.zone) for w in in_day}
    return CronNeed(schedule, tuple(waits), frozenset(offsets), count)


def day_groups(schedule: ScheduleDefinition, year: int) -> list[tuple[date, int]]:
    """One day per kind of firing day in ``year``, with how many days are of that kind.

    A day's slots, and those of the days its slots' waits can reach, are the same in UTC
    as another day's when both fire, keep one UTC offset all day, and are followed by the
    same pattern of firing days and offsets; days near a clock change stand alone.
    """
    from cronsim import CronSim

    zone, sim = schedule.zone, CronSim(str(schedule.cron), datetime(year, 1, 1))
    ahead = schedule.effective_max_delay.days + 2
    first = date(year, 1, 1)
    days = [first + timedelta(days=k) for k in range(366 + ahead + 2)]
    starts = [offset_at_midnight(d, zone) for d in days]
    kinds = [(fires_on(sim, d), starts[k], starts[k + 1]) for k, d in enumerate(days[:-1])]
    groups: dict[object, tuple[date, int]] = {}
    for k, day in enumerate(days[: (date(year + 1, 1, 1) - first).days]):
        if not kinds[k][0]:
            continue
        window = tuple(kinds[k : k + ahead + 1])
        key = day if any(a != b for _, a, b in window) else window
        first_day, count = groups.get(key, (day, 0))
        groups[key] = (first_day, count + 1)
    return list(groups.values())


def fires_on(sim: CronSim, day: date) -> bool:
    """Whether a cron expression has times on ``day`` (cronsim's match_day skips months)."""
    return day.month in sim.months and sim.match_day(day)


def day_waits(schedule: ScheduleDefinition, day: date) -> list[Wait]:
    """The slots of one local ``day`` with how late each may be reached."""
    zone, max_delay = schedule.zone, schedule.effective_max_delay
    keep = 1 if schedule.catch_up == "latest" else schedule.max_catch_up
    start, end = midnight(day, zone), midnight(day + timedelta(days=1), zone)
    today = schedule.slots_between(start - TICK, end - TICK, 1_000_000)
    if not today:
        return []
    slots = today + schedule.slots_between(today[-1], end + max_delay, keep)
    waits = []
    for i, slot in enumerate(today):
        replaced_by = slots[i + keep] if i + keep < len(slots) else None
        if replaced_by is not None and replaced_by - slot - TICK < max_delay:
            waits.append(Wait(slot, replaced_by - slot - TICK, replaced_by))
        else:
            waits.append(Wait(slot, max_delay, None))
    return waits


def midnight(day: date, zone: ZoneInfo) -> datetime:
    return datetime.combine(day, time(), zone).astimezone(UTC)


def offset_at_midnight(day: date, zone: ZoneInfo) -> timedelta:
    return datetime.combine(day, time(), zone).utcoffset() or timedelta(0)


def offset_at(moment: datetime, zone: ZoneInfo) -> timedelta:
    return moment.astimezone(zone).utcoffset() or timedelta(0)


def us(value: timedelta) -> int:
    return value // TICK


def span(value: timedelta) -> str:
    """``15m``, ``1h``, ``1h 30m``, ``1d``, ``45s``, ``0s``: a duration for people."""
    seconds = value.total_seconds()
    if seconds < 60:
        return f"{seconds:g}s"
    parts, rest = [], round(seconds)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        if rest >= size:
            parts.append(f"{rest // size}{unit}")
            rest %= size
    return " ".join(parts)


def names(needs: Iterable[Need]) -> str:
    return ", ".join(f"{n.kind} {n.name!r}" for n in needs)
