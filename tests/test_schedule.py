"""Schedules as pure code: slots, time zones and daylight saving, catch-up, validation."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from itertools import pairwise
from zoneinfo import ZoneInfo

import pytest

from tickq import ConfigurationError, Queue
from tickq.schedule import ScheduleDefinition

BERLIN = ZoneInfo("Europe/Berlin")
# 2026: clocks go 02:00 -> 03:00 on 29 March and 03:00 -> 02:00 on 25 October in Berlin.
SPRING = datetime(2026, 3, 29, tzinfo=BERLIN)
AUTUMN = datetime(2026, 10, 25, tzinfo=BERLIN)


def cron(expr: str, tz: str = "UTC", **kw: object) -> ScheduleDefinition:
    return ScheduleDefinition(name="s", job="s", cron=expr, tz=tz, **kw)  # type: ignore[arg-type]


def every(delta: timedelta, **kw: object) -> ScheduleDefinition:
    return ScheduleDefinition(name="s", job="s", every=delta, **kw)  # type: ignore[arg-type]


def utc(*args: int) -> datetime:
    return datetime(*args, tzinfo=UTC)  # type: ignore[misc]


def local(slots: list[datetime]) -> list[str]:
    return [s.astimezone(BERLIN).strftime("%m-%d %H:%M%z") for s in slots]


# -- slots ------------------------------------------------------------------------------
def test_cron_slots_are_aware_utc_and_strictly_after() -> None:
    s = cron("*/15 * * * *")
    assert s.next_slot(utc(2026, 5, 4, 9, 0)) == utc(2026, 5, 4, 9, 15)
    assert s.next_slot(utc(2026, 5, 4, 9, 0, 0) - timedelta(microseconds=1)) == utc(2026, 5, 4, 9)
    slots = s.slots_between(utc(2026, 5, 4, 9), utc(2026, 5, 4, 10), limit=10)
    assert slots == [
        utc(2026, 5, 4, 9, 15),
        utc(2026, 5, 4, 9, 30),
        utc(2026, 5, 4, 9, 45),
        utc(2026, 5, 4, 10),
    ]
    assert all(x.tzinfo is UTC for x in slots)
    assert s.slots_between(utc(2026, 5, 4, 9), utc(2026, 5, 4, 10), limit=2) == slots[:2]


def test_interval_slots_are_aligned_to_the_utc_epoch() -> None:
    s = every(timedelta(minutes=15))
    assert s.next_slot(utc(2026, 5, 4, 9, 7, 12)) == utc(2026, 5, 4, 9, 15)
    assert s.next_slot(utc(2026, 5, 4, 9, 15)) == utc(2026, 5, 4, 9, 30)
    assert every(timedelta(hours=1)).slots_between(
        utc(2026, 5, 4, 9, 30), utc(2026, 5, 4, 12), limit=5
    ) == [utc(2026, 5, 4, 10), utc(2026, 5, 4, 11), utc(2026, 5, 4, 12)]


def test_aliases_and_slot_keys() -> None:
    assert cron("@daily").cron == "0 0 * * *"
    assert cron("  0   9 * *  1-5 ").cron == "0 9 * * 1-5"
    assert cron("@hourly").slot_key(utc(2026, 5, 4, 9)) == "schedule:s:2026-05-04T09:00:00+00:00"


# -- daylight saving ----------------------------------------------------------------------
def test_nine_am_berlin_stays_nine_am_local_across_both_changes() -> None:
    s = cron("0 9 * * *", "Europe/Berlin")
    spring = s.slots_between(utc(2026, 3, 27), utc(2026, 3, 31), limit=10)
    assert local(spring) == [
        "03-27 09:00+0100",
        "03-28 09:00+0100",
        "03-29 09:00+0200",
        "03-30 09:00+0200",
    ]
    assert [x.hour for x in spring] == [8, 8, 7, 7]  # stored in UTC, so the UTC hour moves
    autumn = s.slots_between(utc(2026, 10, 23), utc(2026, 10, 27), limit=10)
    assert local(autumn) == [
        "10-23 09:00+0200",
        "10-24 09:00+0200",
        "10-25 09:00+0100",
        "10-26 09:00+0100",
    ]
    assert [x.hour for x in autumn] == [7, 7, 8, 8]


def test_nonexistent_local_time_fires_once_right_after_the_jump() -> None:
    """02:30 does not exist on 29 March in Berlin: that day's run is at 03:00 CEST."""
    s = cron("30 2 * * *", "Europe/Berlin")
    slots = s.slots_between(utc(2026, 3, 27, 12), utc(2026, 3, 30, 12), limit=10)
    assert local(slots) == ["03-28 02:30+0100", "03-29 03:00+0200", "03-30 02:30+0200"]


def test_repeated_local_time_fires_once_the_first_time() -> None:
    """02:30 happens twice on 25 October in Berlin: it runs once, at 02:30 CEST."""
    s = cron("30 2 * * *", "Europe/Berlin")
    slots = s.slots_between(utc(2026, 10, 23, 12), utc(2026, 10, 26, 12), limit=10)
    assert local(slots) == ["10-24 02:30+0200", "10-25 02:30+0200", "10-26 02:30+0100"]
    # Asked from inside the repeated hour (after the first 02:30), it is not offered again.
    second_0210 = datetime(2026, 10, 25, 2, 10, tzinfo=BERLIN, fold=1)
    assert local([s.next_slot(second_0210)]) == ["10-26 02:30+0100"]
    assert s.due(second_0210, second_0210 + timedelta(minutes=30)).slots == []


def test_sub_hourly_cron_follows_real_time_through_the_changes() -> None:
    s = cron("*/30 * * * *", "Europe/Berlin")
    autumn_day = s.slots_between(
        AUTUMN - timedelta(microseconds=1),
        AUTUMN + timedelta(days=1) - timedelta(microseconds=1),
        limit=100,
    )
    assert len(autumn_day) == 50  # a 25-hour day
    spring_day = s.slots_between(
        SPRING - timedelta(microseconds=1),
        SPRING + timedelta(days=1) - timedelta(microseconds=1),
        limit=100,
    )
    assert len(spring_day) == 46  # a 23-hour day
    steps = {b - a for a, b in pairwise(autumn_day)}
    assert steps == {timedelta(minutes=30)}


# -- catch-up -----------------------------------------------------------------------------
def test_latest_runs_only_the_newest_missed_slot_and_counts_the_rest() -> None:
    s = cron("*/15 * * * *")
    due = s.due(utc(2026, 5, 4, 9), utc(2026, 5, 4, 12, 7))
    assert due.slots == [utc(2026, 5, 4, 12)]
    assert due.missed == 11
    assert s.due(utc(2026, 5, 4, 12), utc(2026, 5, 4, 12, 14)).slots == []


def test_all_runs_every_missed_slot_up_to_the_bound() -> None:
    s = cron("*/15 * * * *", catch_up="all", max_catch_up=5)
    due = s.due(utc(2026, 5, 4, 9), utc(2026, 5, 4, 10))
    assert (due.slots, due.missed) == (
        s.slots_between(utc(2026, 5, 4, 9), utc(2026, 5, 4, 10), 10),
        0,
    )
    due = s.due(utc(2026, 5, 4, 9), utc(2026, 5, 4, 12, 7))
    assert due.slots == [
        utc(2026, 5, 4, 11),
        utc(2026, 5, 4, 11, 15),
        utc(2026, 5, 4, 11, 30),
        utc(2026, 5, 4, 11, 45),
        utc(2026, 5, 4, 12),
    ]
    assert due.missed == 7


def test_interval_catch_up_is_exact_arithmetic() -> None:
    s = every(timedelta(minutes=10), catch_up="all", max_catch_up=3)
    due = s.due(utc(2026, 1, 1), utc(2026, 1, 8))  # a week asleep: 1008 slots
    assert due.slots == [utc(2026, 1, 7, 23, 40), utc(2026, 1, 7, 23, 50), utc(2026, 1, 8)]
    assert due.missed == 1005
    assert every(timedelta(minutes=10)).due(utc(2026, 1, 1), utc(2026, 1, 1, 0, 9)).slots == []


@pytest.mark.parametrize("expr", ["*/7 * * * *", "30 2 * * *", "0 9 * * 1-5", "15 1-3 * * *"])
@pytest.mark.parametrize("catch_up", ["latest", "all"])
def test_long_sleeps_jump_ahead_to_the_same_slots(expr: str, catch_up: str) -> None:
    """Past the count limit the walk jumps to the end; it must pick the same slots."""
    s = cron(expr, "Europe/Berlin", catch_up=catch_up, max_catch_up=4)
    for after, until in [
        (utc(2026, 3, 1), utc(2026, 3, 29, 0, 40)),
        (utc(2026, 10, 1), datetime(2026, 10, 25, 2, 50, tzinfo=BERLIN, fold=1)),
        (utc(2026, 10, 1), utc(2026, 11, 2, 13, 5)),
    ]:
        walked = s.due(after, until)
        jumped = s.due(after, until, count_limit=10)
        assert jumped.slots == walked.slots
        assert walked.missed > 10 and jumped.missed == 10


# -- validation ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"cron": "61 * * * *"}, "invalid cron '61 * * * *'"),
        ({"cron": "0 0 9 * * *"}, "has 6 field(s); expected 5"),
        ({"cron": ""}, "has 0 field(s)"),
        ({"cron": "0 9 * * *", "tz": "Europe/Berln"}, "unknown time zone 'Europe/Berln'"),
        ({"cron": "0 9 * * *", "every": timedelta(hours=1)}, "exactly one of cron"),
        ({}, "exactly one of cron"),
        ({"every": timedelta(0)}, "every must be at least 1 second"),
        ({"every": 60}, "every must be a timedelta, got int"),
        ({"every": timedelta(days=1), "tz": "Europe/Berlin"}, "applies to cron schedules only"),
        ({"cron": "@daily", "catch_up": "some"}, "catch_up must be 'latest' or 'all'"),
        ({"cron": "@daily", "max_catch_up": 0}, "max_catch_up must be >= 1, got 0"),
        ({"cron": "@daily", "max_delay": timedelta(0)}, "max_delay must be positive"),
        ({"cron": "0 0 31 2 *"}, "invalid cron '0 0 31 2 *'"),
    ],
)
def test_bad_schedules_fail_at_declaration_naming_the_value(kwargs: dict, message: str) -> None:  # type: ignore[type-arg]
    with pytest.raises(ConfigurationError, match="schedule 's'") as excinfo:
        ScheduleDefinition(name="s", job="s", **kwargs)
    assert message in str(excinfo.value)


def test_decorator_registers_a_job_and_refuses_mistakes(tmp_path) -> None:  # type: ignore[no-untyped-def]
    q = Queue(f"sqlite:///{tmp_path / 'q.db'}")

    @q.schedule("0 9 * * *", tz="Europe/Berlin", max_delay=timedelta(hours=1))
    def digest() -> None: ...

    @q.schedule("0 18 * * *", name="digest-evening")
    @q.job(max_attempts=2)
    def evening() -> None: ...

    assert q._schedules["digest"].max_delay == timedelta(hours=1)
    assert q._definition("digest").max_delay is None  # type: ignore[union-attr]
    assert q._schedules["digest"].tz == "Europe/Berlin"
    assert q._schedules["digest-evening"].job == "evening"
    assert q._definition("evening").max_attempts == 2  # type: ignore[union-attr]
    with pytest.raises(ConfigurationError, match="already registered"):
        q.schedule("@daily", name="digest-evening")(evening)
    with pytest.raises(ConfigurationError, match=r"@q.schedule\('\*/15 \* \* \* \*'\)"):
        q.schedule(lambda: None)  # type: ignore[arg-type]  # bare @q.schedule
    with pytest.raises(ConfigurationError, match="requires some; give them defaults"):

        @q.schedule("@hourly")
        def needs_args(user_id: int) -> None: ...

    assert q._definition("needs_args") is None and "needs_args" not in q._schedules
