"""Cron lines in UTC that call the tick only when a schedule is due (pure).

When nothing but schedules needs the tick, a scheduler can call exactly at their slots
instead of on a grid. Schedulers run cron in UTC, so each schedule is moved to UTC: exactly
when its zone keeps one offset all year; for a zone that changes its clocks the lines call
at the slot's UTC time in every season (``0 9 * * *`` in Berlin becomes ``0 7,8 * * *``),
so one of them is idle, and they are checked against every slot of the year, the nights
of the clock changes included, before they are offered.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta

from ..schedule import ScheduleDefinition
from ..schedulers.timing import OFFSET_MINUTE
from .needs import TICK, CronNeed, EveryNeed, Need, TriggeredNeed, fires_on, names, span

DAY_MINUTES = 1440


@dataclass(frozen=True)
class CronLine:
    """One UTC cron line: its minutes and hours, and the day fields as written."""

    minutes: frozenset[int]
    hours: frozenset[int]
    days: tuple[str, str, str]
    """day of month, month, day of week"""

    def text(self) -> str:
        return " ".join((field(self.minutes, 60), field(self.hours, 24), *self.days))


@dataclass(frozen=True)
class CronLines:
    """Lines that call only when a schedule is due, and what they cost."""

    lines: tuple[str, ...]
    exact: bool
    """False when some zone changes its clocks: then some calls find nothing due."""
    notes: tuple[str, ...]
    calls: tuple[int, ...]
    """Every call in the year, as minutes since its start."""
    days: int
    slots: int
    """Slots the schedules have in the same year."""


class NoLines(Exception):
    """Why no UTC cron lines can replace a grid."""


def cron_lines(needs: list[Need], year: int) -> CronLines:
    """The lines for the app's schedules, or NoLines saying why there are none."""
    triggered = [n for n in needs if isinstance(n, TriggeredNeed)]
    if triggered:
        raise NoLines(
            f"{names(triggered)} can be enqueued at any time, so the tick has to poll on a grid"
        )
    lines: set[CronLine] = set()
    notes = []
    for need in needs:
        if isinstance(need, EveryNeed):
            lines |= every_lines(need)
        elif isinstance(need, CronNeed):
            moved = {offset: utc_lines(need, offset) for offset in sorted(need.offsets)}
            lines |= set().union(*moved.values())
            if len(moved) > 1:
                notes.append(season_note(need, moved))
    merged = off_the_hour(merge(lines), needs)
    for need in needs:
        if isinstance(need, CronNeed) and len(need.offsets) > 1:
            check(need, merged)
    texts = tuple(sorted(line.text() for line in merged))
    calls = calls_in(texts, year)
    if not calls:
        raise NoLines(f"no schedule is due in {year}, so there is nothing to count calls by")
    days = (date(year + 1, 1, 1) - date(year, 1, 1)).days
    slots = sum(slots_per_year(n, days) for n in needs)
    return CronLines(texts, not notes, tuple(notes), calls, days, slots)


def every_lines(need: EveryNeed) -> set[CronLine]:
    every = need.every
    if every % timedelta(minutes=1) or timedelta(days=1) % every:
        raise NoLines(
            f"schedule {need.name!r} fires every {span(every)}, not a whole number of minutes "
            "that divides a day, so no cron line repeats it"
        )
    step = every // timedelta(minutes=1)
    return by_hour({0: [(t // 60, t % 60) for t in range(0, DAY_MINUTES, step)]}, ("*",) * 3)


def utc_lines(need: CronNeed, offset: timedelta) -> set[CronLine]:
    """The schedule's local times moved to UTC for one offset of its zone."""
    from cronsim import CronSim

    if offset % timedelta(minutes=1):
        raise NoLines(f"schedule {need.name!r}: its zone's offset {offset} is not whole minutes")
    sim = CronSim(str(need.schedule.cron), datetime(2000, 1, 1))
    shift_minutes = offset // timedelta(minutes=1)
    by_day: dict[int, list[tuple[int, int]]] = defaultdict(list)
    for hour in sim.hours:
        for minute in sim.minutes:
            day, t = divmod(hour * 60 + minute - shift_minutes, DAY_MINUTES)
            by_day[day].append((t // 60, t % 60))
    return by_hour(by_day, day_fields(need.schedule), f"schedule {need.name!r}")


def by_hour(
    by_day: dict[int, list[tuple[int, int]]], days: tuple[str, str, str], need: str = ""
) -> set[CronLine]:
    """Group (hour, minute) times into lines: hours with the same minutes share one."""
    lines = set()
    for shift, times in by_day.items():
        fields = shifted(days, shift, need)
        minutes_by_hour: dict[int, set[int]] = defaultdict(set)
        for hour, minute in times:
            minutes_by_hour[hour].add(minute)
        hours_by_minutes: dict[frozenset[int], set[int]] = defaultdict(set)
        for hour, minutes in minutes_by_hour.items():
            hours_by_minutes[frozenset(minutes)].add(hour)
        lines |= {CronLine(m, frozenset(h), fields) for m, h in hours_by_minutes.items()}
    return lines


def day_fields(schedule: ScheduleDefinition) -> tuple[str, str, str]:
    dom, month, dow = str(schedule.cron).split()[2:]
    return dom, month, dow


def shifted(days: tuple[str, str, str], shift: int, need: str) -> tuple[str, str, str]:
    """The day fields for times that move to the day before (-1) or after (+1) in UTC."""
    dom, month, dow = days
    if shift == 0 or days == ("*", "*", "*"):
        return days
    if dom == "*" and month == "*" and not any(c in dow.upper() for c in "L#"):
        from cronsim import CronSim

        sim = CronSim(f"0 0 * * {dow}", datetime(2000, 1, 1))
        weekdays = {w % 7 for w in sim.weekdays if isinstance(w, int)}  # no L or #: no tuples
        return dom, month, field(frozenset((w + shift) % 7 for w in weekdays), 7)
    raise NoLines(
        f"{need or 'a schedule'}: some of its times fall on the day "
        f"{'before' if shift < 0 else 'after'} in UTC, and cron can't move the days "
        f"'{dom} {month} {dow}' by a day"
    )


def merge(lines: set[CronLine]) -> list[CronLine]:
    """Join lines that differ only in their minutes, or only in their hours."""
    pending = sorted(lines, key=CronLine.text)
    changed = True
    while changed:
        changed = False
        for i, a in enumerate(pending):
            for b in pending[i + 1 :]:
                if (a.hours, a.days) == (b.hours, b.days):
                    joined = CronLine(a.minutes | b.minutes, a.hours, a.days)
                elif (a.minutes, a.days) == (b.minutes, b.days):
                    joined = CronLine(a.minutes, a.hours | b.hours, a.days)
                else:
                    continue
                pending = [x for x in pending if x not in (a, b)] + [joined]
                changed = True
                break
            if changed:
                break
    return sorted(pending, key=CronLine.text)


def off_the_hour(lines: list[CronLine], needs: list[Need]) -> list[CronLine]:
    """Lines calling at minute 0 moved to minute 7 when every slot allows it, as the grid's
    ticks are: shared schedulers are busiest, and start runs latest, at the top of the hour."""
    if not any(0 in line.minutes for line in lines):
        return lines
    room = min(slack(need) for need in needs if not isinstance(need, TriggeredNeed))
    latest = 59 - max(m for line in lines for m in line.minutes)
    if room < timedelta(minutes=OFFSET_MINUTE) or latest < OFFSET_MINUTE:
        return lines
    return [
        CronLine(frozenset(m + OFFSET_MINUTE for m in line.minutes), line.hours, line.days)
        for line in lines
    ]


def slack(need: Need) -> timedelta:
    """How late every slot of a schedule may be reached."""
    if isinstance(need, CronNeed):
        return min(wait.limit for wait in need.waits)
    if isinstance(need, EveryNeed):
        return timedelta(microseconds=need.limit)
    return need.max_delay


def check(need: CronNeed, lines: list[CronLine]) -> None:
    """Every slot of the year (clock-change nights included) is reached in time."""
    texts = [line.text() for line in lines]
    for wait in need.waits:
        delay = next_call(texts, wait.slot) - wait.slot
        if delay > wait.limit:
            raise NoLines(
                f"schedule {need.name!r} ({need.describe()}) has a slot at "
                f"{need.local_time(wait.slot)} on {wait.slot:%Y-%m-%d}, when the clocks "
                f"change; lines calling at its usual UTC times reach it only {span(delay)} "
                f"later, more than its max_delay {span(need.max_delay)}"
            )


def next_call(lines: list[str], at: datetime) -> datetime:
    """The first call at or after ``at``."""
    from cronsim import CronSim

    return min(next(CronSim(line, at - TICK)) for line in lines)


def calls_in(lines: tuple[str, ...], year: int) -> tuple[int, ...]:
    """Every call in ``year`` as minutes since it began (UTC)."""
    from cronsim import CronSim

    start = datetime(year, 1, 1, tzinfo=UTC)
    sims = [CronSim(line, start) for line in lines]
    calls: list[int] = []
    day = start.date()
    for n in range((date(year + 1, 1, 1) - day).days):
        today = {
            hour * 60 + minute
            for sim in sims
            if fires_on(sim, day + timedelta(days=n))
            for hour in sim.hours
            for minute in sim.minutes
        }
        calls += [n * DAY_MINUTES + t for t in sorted(today)]
    return tuple(calls)


def slots_per_year(need: Need, days: int) -> int:
    if isinstance(need, CronNeed):
        return need.slots_per_year
    if isinstance(need, EveryNeed):
        return round(timedelta(days=days) / need.every)
    return 0


def season_note(need: CronNeed, moved: dict[timedelta, set[CronLine]]) -> str:
    zone = need.schedule.tz
    seasons = []
    for offset, lines in moved.items():
        times = sorted(f"{h:02}:{m:02}" for line in lines for h in line.hours for m in line.minutes)
        when = " and ".join(times) + " UTC" if len(times) <= 2 else "other times"
        seasons.append(f"{when} while it is UTC{utc_offset(offset)}")
    return (
        f"not exact: {zone} changes its clocks, so schedule {need.name!r} "
        f"({need.describe()}) is due at {', '.join(seasons)}; no UTC cron line follows the "
        "change, so these call at both and some calls find nothing due"
    )


def utc_offset(offset: timedelta) -> str:
    minutes = offset // timedelta(minutes=1)
    sign, minutes = ("+" if minutes >= 0 else "-"), abs(minutes)
    return f"{sign}{minutes // 60:02}:{minutes % 60:02}"


def field(values: frozenset[int], size: int) -> str:
    """A cron field for ``values`` out of ``0..size-1``: ``*``, ``*/15``, ``1-5``, ``7,37``."""
    ordered = sorted(values)
    if len(ordered) == size:
        return "*"
    for step in range(2, size // 2 + 1):
        if ordered == list(range(0, size, step)):
            return f"*/{step}"
    runs: list[list[int]] = []
    for v in ordered:
        if runs and v == runs[-1][-1] + 1:
            runs[-1].append(v)
        else:
            runs.append([v])
    return ",".join(f"{r[0]}-{r[-1]}" if len(r) > 2 else ",".join(map(str, r)) for r in runs)
