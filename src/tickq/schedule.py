"""Internal: schedules (cron expressions or fixed intervals) and which of their slots are due.

A *slot* is one moment a schedule fires, as an aware UTC datetime. A tick asks each
schedule for the slots in ``(handled_until, now]`` and enqueues them under a unique key.

Cron expressions are evaluated by ``cronsim`` in the schedule's IANA time zone, with Debian
cron's daylight-saving rules for jobs at a fixed hour (``30 2 * * *``): a local time that
does not exist (clocks jump 02:00 -> 03:00) fires once, right after the jump (03:00); a
local time that happens twice (clocks fall back 03:00 -> 02:00) fires once, the first time.
Expressions whose hour field starts with ``*`` (``*/15 * * * *``, ``0 * * * *``) run on
real elapsed time: every 15 real minutes, across both changes.

Intervals (``every=``) are fixed lengths of real time counted from 1970-01-01 00:00 UTC, so
``every=timedelta(hours=1)`` fires on the hour and ``minutes=15`` at :00, :15, :30, :45.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from .clock import require_aware
from .errors import ConfigurationError
from .job_options import check_name

if TYPE_CHECKING:
    from zoneinfo import ZoneInfo

CATCH_UP = ("latest", "all")
DEFAULT_MAX_CATCH_UP = 100
DEFAULT_MAX_DELAY = timedelta(minutes=15)
"""How late a slot may start when ``max_delay`` is not given; also how far back a schedule
seen for the first time looks for a slot it should still run."""
MISSED_COUNT_LIMIT = 10_000
"""Missed slots are counted one by one up to this many; a longer sleep reports this."""
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
ALIASES = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
# Debian cron's DST rules move a fixed-hour slot by at most the size of the clock change
# (two hours anywhere on Earth); reverse search is trued up by walking forward this far.
DST_MARGIN = timedelta(hours=3)


@dataclass(frozen=True, slots=True)
class Due:
    """What a tick should enqueue for one schedule."""

    slots: list[datetime]
    """Slots to enqueue, oldest first."""
    missed: int
    """Due slots skipped by the catch-up policy (counted up to ``MISSED_COUNT_LIMIT``)."""


@dataclass(frozen=True, slots=True)
class ScheduleDefinition:
    """When a job type runs: a 5-field ``cron`` expression in ``tz``, or ``every`` interval.

    ``catch_up="latest"`` runs only the most recent of the slots missed while the app slept
    (the job's ``ctx.meta["missed"]`` says how many were skipped); ``"all"`` runs each one,
    the latest ``max_catch_up`` at most. ``max_delay`` is how late a slot may start (None:
    ``DEFAULT_MAX_DELAY``); ``tickq plan`` uses it to pick the tick interval.
    """

    name: str
    job: str
    cron: str | None = None
    every: timedelta | None = None
    tz: str = "UTC"
    catch_up: str = "latest"
    max_catch_up: int = DEFAULT_MAX_CATCH_UP
    max_delay: timedelta | None = None

    def __post_init__(self) -> None:
        where = f"schedule {self.name!r}"
        if not self.name:
            raise ConfigurationError("a schedule needs a non-empty name")
        check_name("schedule name", self.name)
        if (self.cron is None) == (self.every is None):
            raise ConfigurationError(
                f"{where} needs exactly one of cron (e.g. '*/15 * * * *') or "
                "every (e.g. every=timedelta(hours=1))"
            )
        if self.catch_up not in CATCH_UP:
            raise ConfigurationError(
                f"{where}: catch_up must be 'latest' or 'all', got {self.catch_up!r}"
            )
        if self.max_catch_up < 1:
            raise ConfigurationError(f"{where}: max_catch_up must be >= 1, got {self.max_catch_up}")
        if self.max_delay is not None and self.max_delay <= timedelta(0):
            raise ConfigurationError(f"{where}: max_delay must be positive, got {self.max_delay}")
        if self.every is not None:
            self._check_every(where)
        else:
            object.__setattr__(self, "cron", normalise_cron(str(self.cron), where))
            self.zone  # noqa: B018 - fail now, naming the zone, not on the first tick
            self.next_slot(datetime.now(UTC))  # an expression that never fires fails here

    def _check_every(self, where: str) -> None:
        if not isinstance(self.every, timedelta):
            raise ConfigurationError(
                f"{where}: every must be a timedelta, got {type(self.every).__name__}"
            )
        if self.every < timedelta(seconds=1):
            raise ConfigurationError(f"{where}: every must be at least 1 second, got {self.every}")
        if self.tz != "UTC":
            raise ConfigurationError(
                f"{where}: tz={self.tz!r} applies to cron schedules only (every= counts real "
                "time from 1970-01-01 UTC); for a local time of day use a cron expression, "
                "e.g. cron='0 9 * * *', tz='Europe/Berlin'"
            )

    @property
    def zone(self) -> ZoneInfo:
        return load_zone(self.tz, f"schedule {self.name!r}")

    @property
    def effective_max_delay(self) -> timedelta:
        return self.max_delay or DEFAULT_MAX_DELAY

    def describe(self) -> str:
        """``cron '0 9 * * *' (Europe/Berlin)`` or ``every 1:00:00``."""
        return f"cron {self.cron!r} ({self.tz})" if self.cron else f"every {self.every}"

    def slot_key(self, slot: datetime) -> str:
        """The job's unique key for one slot: the same in every process and on every tick."""
        return f"schedule:{self.name}:{slot.astimezone(UTC).isoformat()}"

    # -- slots -------------------------------------------------------------------------
    def next_slot(self, after: datetime) -> datetime:
        """The first slot strictly after ``after`` (aware UTC)."""
        for slot in self._forward(require_aware(after, "after")):
            return slot
        raise ConfigurationError(
            f"schedule {self.name!r}: cron {self.cron!r} never fires in the 50 years "
            f"after {after.isoformat()}"
        )

    def slots_between(self, after: datetime, until: datetime, limit: int) -> list[datetime]:
        """Slots in ``(after, until]``, oldest first, at most ``limit`` of them."""
        until = require_aware(until, "until")
        out: list[datetime] = []
        for slot in self._forward(require_aware(after, "after")):
            if slot > until or len(out) >= limit:
                break
            out.append(slot)
        return out

    def due(self, after: datetime, until: datetime, count_limit: int = MISSED_COUNT_LIMIT) -> Due:
        """The slots in ``(after, until]`` to enqueue under the catch-up policy."""
        after, until = require_aware(after, "after"), require_aware(until, "until")
        keep = 1 if self.catch_up == "latest" else self.max_catch_up
        if self.every is not None:
            return self._due_every(after, until, keep)
        window: deque[datetime] = deque(maxlen=keep)
        count = 0
        for slot in self._forward(after):
            if slot > until:
                break
            window.append(slot)
            count += 1
            if count >= count_limit + keep:  # too far behind to walk every slot: jump
                return Due(self._latest(after, until, keep), count_limit)
        return Due(list(window), count - len(window))

    def _due_every(self, after: datetime, until: datetime, keep: int) -> Due:
        assert self.every is not None
        first, last = (after - EPOCH) // self.every + 1, (until - EPOCH) // self.every
        if last < first:
            return Due([], 0)
        kept = range(max(first, last - keep + 1), last + 1)
        return Due([EPOCH + k * self.every for k in kept], last - first + 1 - len(kept))

    def _latest(self, after: datetime, until: datetime, keep: int) -> list[datetime]:
        """The last ``keep`` slots in ``(after, until]`` without walking from ``after``."""
        from cronsim import CronSim

        backwards = CronSim(
            str(self.cron), (until + timedelta(microseconds=1)).astimezone(self.zone), reverse=True
        )
        earliest = until
        for _, slot in zip(range(keep), backwards, strict=False):
            earliest = slot.astimezone(UTC)
        # Walking back is off by up to an hour around a clock change; walking forward from
        # a little earlier is exact.
        window: deque[datetime] = deque(maxlen=keep)
        for slot in self._forward(max(after, earliest - DST_MARGIN)):
            if slot > until:
                break
            window.append(slot)
        return list(window)

    def _forward(self, after: datetime) -> Iterator[datetime]:
        """Every slot strictly after ``after``, oldest first."""
        if self.every is not None:
            k = (after - EPOCH) // self.every + 1
            while True:
                yield EPOCH + k * self.every
                k += 1
        from cronsim import CronSim

        for slot in CronSim(str(self.cron), after.astimezone(self.zone)):
            slot = slot.astimezone(UTC)
            # cronsim fires a repeated local time at its first occurrence, which can be
            # before ``after`` when ``after`` is inside the repeated hour.
            if slot > after:
                yield slot

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready description (for ``tickq plan`` and inspection)."""
        return {
            "name": self.name,
            "job": self.job,
            "cron": self.cron,
            "every_seconds": self.every.total_seconds() if self.every else None,
            "tz": self.tz,
            "catch_up": self.catch_up,
            "max_catch_up": self.max_catch_up,
            "max_delay_seconds": self.max_delay.total_seconds() if self.max_delay else None,
        }


def normalise_cron(expr: str, where: str) -> str:
    """Validate a 5-field cron expression (or @daily-style alias); return it tidied."""
    from cronsim import CronSim, CronSimError

    text = " ".join(expr.split())
    text = ALIASES.get(text.lower(), text)
    fields = text.split(" ") if text else []
    if len(fields) != 5:
        raise ConfigurationError(
            f"{where}: cron {expr!r} has {len(fields)} field(s); expected 5: "
            "minute hour day-of-month month day-of-week, e.g. '*/15 * * * *'"
        )
    try:
        CronSim(text, datetime(2000, 1, 1))
    except CronSimError as exc:
        raise ConfigurationError(
            f"{where}: invalid cron {expr!r} ({exc}); expected minute hour day-of-month "
            "month day-of-week, e.g. '0 9 * * 1-5'"
        ) from None
    if problem := step_problem(text):
        raise ConfigurationError(f"{where}: invalid cron {expr!r}: {problem}")
    return text


CRON_FIELDS = (("minute", 0, 59), ("hour", 0, 23), ("day-of-month", 1, 31), ("month", 1, 12),
               ("day-of-week", 0, 6))  # fmt: skip


def step_problem(text: str) -> str | None:
    """Why a step of a 5-field cron ``text`` can't mean what it says (``*/61``: cron has
    no 61st minute, so it fires at minute 0 alone), or None. cronsim accepts such steps."""
    for value, (name, low, high) in zip(text.split(), CRON_FIELDS, strict=False):
        for part in value.split(","):
            _, slash, step = part.partition("/")
            if slash and step.isdigit() and int(step) > high - low + 1:
                return (
                    f"the step in {part!r} is larger than the {name} field's range "
                    f"({low}-{high}), so it would fire at one {name} only; use a step from 1 "
                    f"to {high - low + 1}, or an interval schedule (every=timedelta(...)) "
                    "for gaps longer than the field"
                )
    return None


def load_zone(name: str, where: str) -> ZoneInfo:
    """The IANA zone ``name``, or a ConfigurationError that says what to do."""
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, TypeError):
        raise ConfigurationError(
            f"{where}: unknown time zone {name!r}; use an IANA name such as 'UTC' or "
            "'Europe/Berlin' (if every name fails, the system lacks a zone database: "
            "pip install tzdata)"
        ) from None
