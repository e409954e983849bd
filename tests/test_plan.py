"""``tickq plan``: known answers on small apps, checked against the tick's own slot logic.

The strongest check replays a plan: real ``ScheduleDefinition.due`` calls at every tick of
the planned grid through the clock changes, asserting every slot runs within its max_delay
and none is skipped, and that the next slower grid really does fail.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from datetime import UTC, date, datetime, timedelta
from itertools import takewhile
from typing import Any

import pytest
from cronsim import CronSim

from conftest import ROOT, run_tickq
from tickq import Queue, retry
from tickq.errors import ConfigurationError
from tickq.plan import make_plan
from tickq.plan.costs import grid_cost
from tickq.plan.grid import CANDIDATES
from tickq.plan.needs import cron_need, day_waits, span
from tickq.schedule import ScheduleDefinition
from tickq.schedulers import Timing
from tickq.schedulers.timing import interval_cron

YEAR = 2025
URL = "sqlite:///never-opened.db"
SECOND = timedelta(seconds=1)


def app(*schedules: dict[str, Any], jobs: dict[str, dict[str, Any]] | None = None) -> Queue:
    """A Queue declaring ``jobs`` (name -> @q.job options) and ``schedules``."""
    q = Queue(URL)
    for name, options in (jobs or {}).items():
        q.job(name=name, **options)(lambda **_: None)
    for i, options in enumerate(schedules):
        options = dict(options)
        q.schedule(options.pop("cron", None), name=options.pop("name", f"s{i}"), **options)(
            lambda: None
        )
    return q


# ---- the interval, and why ----


def test_a_half_hourly_schedule_binds_before_an_hourly_job() -> None:
    q = app({"cron": "*/30 * * * *", "name": "cleanup"},
            jobs={"send_email": {"max_delay": timedelta(hours=1)}})  # fmt: skip
    plan = make_plan(q, year=YEAR)
    assert (plan.grid.interval, plan.timing.cron) == (30, "7,37 * * * *")
    assert len(plan.why) == 1 and "schedule 'cleanup'" in plan.why[0], plan.why
    waits = {need.name: plan.worst_wait(need) for need in plan.needs}
    assert waits == {"send_email": timedelta(minutes=30), "cleanup": timedelta(minutes=7)}
    assert plan.lines is None and "job 'send_email'" in str(plan.no_lines)


@pytest.mark.parametrize(
    ("max_delay", "interval"),
    [(timedelta(minutes=5), 5), (timedelta(minutes=14), 12), (None, 15), (timedelta(days=2), 1440)],
)
def test_a_job_waits_at_most_one_interval(max_delay: timedelta | None, interval: int) -> None:
    plan = make_plan(app(jobs={"job": {"max_delay": max_delay}}), year=YEAR)
    assert plan.grid.interval == interval
    if interval < 1440:
        slower = min(i for i in CANDIDATES if i > interval)
        assert plan.why == (
            f"job 'job' may be enqueued just after a tick and wait "
            f"{span(timedelta(minutes=slower))} for the next one, more than its max_delay "
            f"{span(max_delay or timedelta(minutes=15))}",
        )


def test_slots_on_the_grid_wait_nothing() -> None:
    """09:00 UTC with a 5-minute max_delay: one tick a day, at 09:00 itself."""
    plan = make_plan(app({"cron": "0 9 * * *", "max_delay": timedelta(minutes=5)}), year=YEAR)
    assert (plan.grid.interval, plan.grid_timing.cron) == (1440, "0 9 * * *")
    assert plan.worst_wait(plan.needs[0]) == timedelta(0)


def test_catch_up_latest_needs_a_tick_between_two_slots() -> None:
    """*/5 with max_delay 15m: ticks every 15 minutes would skip two slots of three."""
    plan = make_plan(app({"cron": "*/5 * * * *"}), year=YEAR)
    assert plan.grid.interval == 5
    assert "would be skipped" in plan.why[0] and "catch_up='latest'" in plan.why[0]
    # Running every slot, 20-minute ticks do: the slot just after a tick waits 15 minutes.
    every_slot = app({"cron": "*/5 * * * *", "catch_up": "all"})
    assert make_plan(every_slot, year=YEAR).grid.interval == 20


def test_schedules_that_need_different_minutes_bind_together() -> None:
    plan = make_plan(app({"cron": "0 9 * * *"}, {"cron": "30 18 * * 1-5"}), year=YEAR)
    assert plan.grid.interval == 30
    assert plan.why == (
        "schedule 's0', schedule 's1': each could live with ticks every 1h, but not at the "
        "same minutes",
    )


def test_every_schedules_are_periodic() -> None:
    assert make_plan(app({"every": timedelta(hours=1)}), year=YEAR).grid.interval == 60
    seven = make_plan(app({"every": timedelta(minutes=7)}), year=YEAR)
    assert seven.grid.interval == 6  # 10-minute ticks would skip some 7-minute slots
    many = app({"every": timedelta(seconds=30), "catch_up": "all", "max_catch_up": 100})
    assert make_plan(many, year=YEAR).grid.interval == 15


def test_nothing_a_cron_scheduler_can_do_is_refused_in_one_line() -> None:
    with pytest.raises(ConfigurationError) as excinfo:
        make_plan(app({"every": timedelta(seconds=30), "name": "pulse"}), year=YEAR)
    message = str(excinfo.value)
    assert "\n" not in message and "schedule 'pulse'" in message
    assert "tickq worker" in message and "max_delay" in message


def test_only_the_apps_own_needs_count() -> None:
    """tickq's alert jobs ride along; a scheduled job is planned by its slots unless its
    @q.job declares a max_delay of its own (then the app enqueues it too)."""
    q = Queue(URL, alerts=[print])
    q.schedule("0 9 * * *", max_delay=timedelta(hours=1))(lambda: None)
    assert q.job_names() == ["tickq.alert", "tickq.alert_delivery", "<lambda>"]
    plan = make_plan(q, year=YEAR)
    assert [(n.kind, n.name) for n in plan.needs] == [("schedule", "<lambda>")]
    assert plan.lines is not None and plan.lines.lines == ("7 9 * * *",)
    assert plan.timing.cron == "7 9 * * *"  # the daily grid: as few calls, so it is chosen

    q = Queue(URL)
    q.schedule("0 9 * * *")(q.job(name="report", max_delay=timedelta(hours=2))(lambda: None))
    plan = make_plan(q, year=YEAR)
    assert [(n.kind, n.name) for n in plan.needs] == [("job", "report"), ("schedule", "report")]
    assert plan.grid.interval == 120 and plan.lines is None


# ---- time zones and clock changes ----


def test_berlin_at_nine_is_two_utc_hours_and_cron_lines_beat_the_grid() -> None:
    plan = make_plan(app({"cron": "0 9 * * *", "tz": "Europe/Berlin", "name": "digest"}),
                     year=YEAR)  # fmt: skip
    assert plan.grid.interval == 60  # 07:00 and 08:00 UTC share no slower grid
    assert "08:00 UTC (09:00 Europe/Berlin)" in plan.why[0]
    assert plan.lines is not None and plan.use_lines
    assert plan.lines.lines == ("7 7,8 * * *",) and not plan.lines.exact
    assert "Europe/Berlin changes its clocks" in plan.lines.notes[0]
    assert "08:00 UTC while it is UTC+01:00" in plan.lines.notes[0]
    assert "07:00 UTC while it is UTC+02:00" in plan.lines.notes[0]
    assert (len(plan.lines.calls), plan.lines.slots) == (730, 365)
    assert plan.timing.cron == "7 7,8 * * *"
    assert plan.worst_wait(plan.needs[0]) == timedelta(minutes=7)


def test_utc_schedules_become_exact_lines() -> None:
    plan = make_plan(app({"cron": "0 6 * * 1-5"}, {"cron": "30 18 * * *"}), year=YEAR)
    assert plan.lines is not None and plan.lines.exact and plan.use_lines
    assert plan.lines.lines == ("37 18 * * *", "7 6 * * 1-5")  # off the hour, both
    assert (len(plan.lines.calls), plan.lines.slots) == (261 + 365, 261 + 365)
    assert plan.timing.cron == plan.grid_timing.cron  # one entry per scheduler: the grid


def test_a_fixed_offset_zone_is_exact() -> None:
    plan = make_plan(app({"cron": "0 9 * * *", "tz": "Asia/Kolkata"}), year=YEAR)
    assert plan.lines is not None and plan.lines.exact and plan.lines.lines == ("30 3 * * *",)


def test_a_weekday_that_crosses_midnight_in_utc_moves_its_day() -> None:
    plan = make_plan(app({"cron": "0 1 * * 1", "tz": "Europe/Berlin"}), year=YEAR)
    assert plan.lines is not None and plan.lines.lines == ("7 0 * * 1", "7 23 * * 0")
    monthly = make_plan(app({"cron": "0 1 1 * *", "tz": "Europe/Berlin"}), year=YEAR)
    assert monthly.lines is None and "can't move the days '1 * *'" in str(monthly.no_lines)


def test_the_spring_forward_night_is_planned_for() -> None:
    """02:30 Berlin doesn't exist on 2025-03-30: the slot runs at 03:00 local, 01:00 UTC,
    half an hour off the grid that serves every other night."""
    plan = make_plan(app({"cron": "30 2 * * *", "tz": "Europe/Berlin"}), year=YEAR)
    assert plan.grid.interval == 30
    assert "01:00 UTC (03:00 Europe/Berlin) slot would wait 30m" in plan.why[0]
    assert plan.lines is None and "on 2025-03-30, when the clocks change" in str(plan.no_lines)


@pytest.mark.parametrize(
    "schedule",
    [
        {"cron": "30 2 * * *", "tz": "Europe/Berlin"},
        {"cron": "0 1 * * 1", "tz": "Europe/Berlin", "max_delay": timedelta(days=3)},
        {"cron": "0 9 * * 1-5", "tz": "America/New_York", "catch_up": "all", "max_catch_up": 2},
        {"cron": "0 * * * *", "tz": "Australia/Lord_Howe"},
        {"cron": "0 9 1 * *", "tz": "Europe/Berlin", "max_delay": timedelta(days=40)},
    ],
    ids=lambda s: f"{s['cron']} {s['tz']}",
)
def test_sampled_days_stand_for_the_whole_year(schedule: dict[str, Any]) -> None:
    """The days planning walks yield exactly the waits that walking all 365 would."""
    definition = next(iter(app(schedule)._schedules.values()))
    need = cron_need(definition, YEAR)
    every_day = [
        w for k in range(365) for w in day_waits(definition, date(YEAR, 1, 1) + timedelta(k))
    ]
    assert need.slots_per_year == len(every_day)
    assert shapes(need.waits) == shapes(every_day)


def shapes(waits: Any) -> set[tuple[str, timedelta]]:
    return {(f"{w.slot:%H:%M}", w.limit) for w in waits}


# ---- replaying plans with the tick's own slot logic ----


REPLAYED = [
    {"cron": "0 9 * * *", "tz": "Europe/Berlin"},
    {"cron": "30 2 * * *", "tz": "Europe/Berlin"},
    {"cron": "0 9 * * 1-5", "tz": "America/New_York"},
    {"cron": "*/20 8-17 * * *", "tz": "Asia/Kolkata"},
    {"cron": "0 * * * *", "tz": "Australia/Lord_Howe"},
]


@pytest.mark.parametrize("schedule", REPLAYED, ids=lambda s: f"{s['cron']} {s['tz']}")
def test_replayed_grid_meets_every_slot_and_a_slower_one_fails(schedule: dict[str, Any]) -> None:
    q = app(schedule)
    plan = make_plan(q, year=YEAR)
    definition = next(iter(q._schedules.values()))
    assert replay(definition, grid_ticks(plan.grid.interval, plan.grid.phase)) is None
    slower = [i for i in CANDIDATES if i > plan.grid.interval]
    for interval in slower:  # every phase of every slower grid misses something
        for phase in range(interval):
            assert replay(definition, grid_ticks(interval, phase)), (interval, phase)


def test_replayed_cron_lines_meet_every_slot() -> None:
    q = app(REPLAYED[0])
    plan = make_plan(q, year=YEAR)
    assert plan.lines is not None
    assert replay(next(iter(q._schedules.values())), line_ticks(plan.lines.lines)) is None


def replay(
    definition: ScheduleDefinition, ticks: Callable[[datetime, datetime], list[datetime]]
) -> str | None:
    """The first thing that goes wrong when ``ticks`` call around the clock changes of
    YEAR (None: nothing): each tick enqueues ``due(cursor, tick)`` as tickq.tick does."""
    for start, end in SEASONS:
        cursor = start
        for tick in ticks(start, end):
            due = definition.due(cursor, tick)
            if due.missed:
                return f"{due.missed} slot(s) skipped at {tick}"
            if due.slots and tick - due.slots[0] > definition.effective_max_delay:
                return f"{due.slots[0]} ran at {tick}"
            cursor = due.slots[-1] if due.slots else cursor
    return None


SEASONS = [
    (datetime(YEAR, m1, d1, tzinfo=UTC), datetime(YEAR, m2, d2, tzinfo=UTC))
    for (m1, d1), (m2, d2) in [
        ((3, 7), (3, 11)),  # the US springs forward on the 9th
        ((3, 28), (4, 8)),  # the EU on the 30th; Lord Howe falls back on 6 April
        ((10, 3), (10, 7)),  # Lord Howe springs forward on the 5th
        ((10, 24), (11, 4)),  # the EU falls back on the 26th, the US on 2 November
    ]
]


def grid_ticks(interval: int, phase: int) -> Callable[[datetime, datetime], list[datetime]]:
    def ticks(start: datetime, end: datetime) -> list[datetime]:
        first = start + timedelta(minutes=phase % interval)
        return [first + k * timedelta(minutes=interval)
                for k in range((end - first) // timedelta(minutes=interval))]  # fmt: skip

    return ticks


def line_ticks(lines: tuple[str, ...]) -> Callable[[datetime, datetime], list[datetime]]:
    def ticks(start: datetime, end: datetime) -> list[datetime]:
        calls = [takewhile(lambda t: t < end, CronSim(line, start)) for line in lines]
        return sorted({call for each in calls for call in each})

    return ticks


# ---- costs and retries ----


def test_costs_are_exact() -> None:
    plan = make_plan(app(jobs={"job": {}}), awake_seconds=10, price_per_hour=0.5, year=YEAR)
    rows = {c.interval: c for c in plan.costs}
    assert sorted(rows) == [1, 5, 15, 30, 60]
    assert [(rows[i].per_day, rows[i].per_month, rows[i].awake_hours, rows[i].cost)
            for i in (1, 15, 60)] == [(1440, 43200, 120.0, 60.0), (96, 2880, 8.0, 4.0),
                                      (24, 720, 2.0, 1.0)]  # fmt: skip
    assert [(i, rows[i].meets, rows[i].recommended) for i in sorted(rows)] == [
        (1, True, False), (5, True, False), (15, True, True), (30, False, False),
        (60, False, False),
    ]  # fmt: skip
    # Calls closer than the awake time keep the app up the whole month, no more.
    assert grid_cost(1, 900, 1.0, meets=True, recommended=False).awake_hours == 720.0
    assert grid_cost(60, 10, None, meets=True, recommended=False).cost is None


def test_cron_lines_cost_their_calls() -> None:
    plan = make_plan(app({"cron": "0 9 * * *", "tz": "Europe/Berlin"}), awake_seconds=36,
                     price_per_hour=0.5, year=YEAR)  # fmt: skip
    lines = plan.costs[-1]
    assert (lines.label, lines.recommended) == ("cron lines", True)
    assert (lines.per_day, lines.per_month, lines.awake_hours, lines.cost) == (2, 60, 0.6, 0.3)


def test_the_grid_stretches_retries_to_the_next_tick() -> None:
    plan = make_plan(app(jobs={"job": {}}), year=YEAR)  # default backoff 1m, 5m, 30m
    [retries] = plan.retries
    assert retries.nominal == (60, 300, 1800)
    assert retries.effective == (900, 900, 1800) and not retries.jitter
    stops = app(jobs={"job": {"max_attempts": 5, "backoff": lambda n: 20 if n < 3 else None,
                              "max_delay": timedelta(hours=1)}})  # fmt: skip
    [retries] = make_plan(stops, year=YEAR).retries
    assert (retries.nominal, retries.effective) == ((20, 20), (3600, 3600))
    random = app(jobs={"job": {"backoff": retry.exponential(base=100, jitter=0.5)}})
    assert make_plan(random, year=YEAR).retries[0].jitter


def test_cron_lines_stretch_retries_to_the_next_call() -> None:
    """A daily digest failing at 08:07 UTC in winter retries at 07:07 UTC the next day."""
    q = app({"cron": "0 9 * * *", "tz": "Europe/Berlin", "name": "digest"})
    [retries] = make_plan(q, year=YEAR).retries
    assert retries.nominal == (60, 300, 1800)
    assert retries.effective == (23 * 3600,) * 3


# ---- grid expressions ----


@pytest.mark.parametrize(
    ("minutes", "offset", "cron"),
    [
        (15, 7, "7,22,37,52 * * * *"),
        (30, 0, "0,30 * * * *"),
        (120, 67, "7 1-23/2 * * *"),
        (480, 7, "7 */8 * * *"),
        (1440, 547, "7 9 * * *"),
    ],
)
def test_grid_expressions_fire_every_interval_from_the_offset(
    minutes: int, offset: int, cron: str
) -> None:
    assert interval_cron(minutes, offset) == cron == Timing.every(minutes, offset).cron
    day = datetime(YEAR, 1, 1, tzinfo=UTC)
    fired = list(takewhile(lambda t: t < day + timedelta(days=1), CronSim(cron, day - SECOND)))
    assert fired == [day + timedelta(minutes=offset % minutes + k * minutes)
                     for k in range(1440 // minutes)]  # fmt: skip


# ---- the command line ----


def plan_json(app_spec: str, *args: str) -> dict[str, Any]:
    result = run_tickq("plan", app_spec, "--json", *args)
    assert result.returncode == 0, result.stderr
    return dict(json.loads(result.stdout))


def test_cli_prints_the_plan_and_why() -> None:
    result = run_tickq("plan", "apps.plans:mixed")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "Recommended: tick every 30 min, cron '7,37 * * * *' (UTC)." in out
    assert "schedule 'cleanup' (cron '*/30 * * * *' (UTC)) with ticks every 1h" in out
    assert "each call keeps the app awake 10 s, --awake-seconds" in out
    assert "every 30 min  <- recommended" in out and "—" in out  # no price: no cost
    assert "send_email  4         1m -> 30m, 5m -> 30m, 30m -> 30m" in out


def test_cli_json_carries_the_numbers() -> None:
    plan = plan_json("apps.plans:five", "--price-per-hour", "0.25", "--awake-seconds", "12")
    assert plan["recommended"] == {"kind": "interval", "cron": ["2,7,12,17,22,27,32,37,42,47,"
                                                                "52,57 * * * *"]}  # fmt: skip
    assert plan["interval"]["minutes"] == 5
    five = next(c for c in plan["costs"] if c["interval_minutes"] == 5)
    # 288 calls a day * 12 s * 30 days = 28.8 h, at 0.25 = 7.2
    assert five == {"label": "every 5 min", "interval_minutes": 5, "meets_needs": True,
                    "recommended": True, "wakeups_per_day": 288.0, "wakeups_per_month": 8640.0,
                    "awake_hours_per_month": 28.8, "cost_per_month": 7.2}  # fmt: skip


def test_cli_berlin_digest_gets_cron_lines_and_why() -> None:
    result = run_tickq("plan", "apps.plans:berlin")
    assert result.returncode == 0, result.stderr
    assert "with this cron line (UTC):\n    7 7,8 * * *\n" in result.stdout
    assert "Europe/Berlin changes its clocks" in result.stdout
    assert "tickq.alert" not in result.stdout
    plan = plan_json("apps.plans:berlin")
    assert plan["recommended"] == {"kind": "cron_lines", "cron": ["7 7,8 * * *"]}
    assert next(c for c in plan["costs"] if c["label"] == "cron lines")["wakeups_per_day"] == 2


def test_scheduler_plan_writes_the_planned_schedule(tmp_path: Any) -> None:
    result = run_tickq("scheduler", "github-actions", "--plan", "apps.plans:mixed")
    assert result.returncode == 0, result.stderr
    assert '- cron: "7,37 * * * *"' in result.stdout
    assert "planned from apps.plans:mixed: every 30 minutes" in result.stderr
    result = run_tickq("scheduler", "crontab", "--plan", "apps.plans:berlin")
    assert result.returncode == 0, result.stderr
    assert result.stdout.count("7 7,8 * * * ") == 1
    # Two lines where schedulers take one expression: the grid, and the plan says so.
    result = run_tickq("scheduler", "kubernetes", "--plan", "apps.plans:utc")
    assert result.returncode == 0, result.stderr
    assert 'schedule: "7,37 * * * *"' in result.stdout
    assert "2 cron lines (37 18 * * *, 7 6 * * 1-5), which kubernetes can't take" in result.stderr


def test_scheduler_plan_refuses_what_github_cannot_do_in_one_line() -> None:
    result = run_tickq("scheduler", "github-actions", "--plan", "apps.plans:minute")
    assert result.returncode == 1 and result.stdout == ""
    [line] = result.stderr.strip().splitlines()
    assert line.startswith("tickq: error: github-actions calls at most every 5 minutes")
    assert "job 'charge'" in line and "max_delay 1m" in line
    assert "cloud-scheduler" in line and "crontab" in line
    assert run_tickq("scheduler", "crontab", "--plan", "apps.plans:minute").returncode == 0


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (("plan", "apps.plans:nothing"), "'apps.plans' has no attribute 'nothing'"),
        (("plan", "apps.plans:mixed", "--awake-seconds", "0"), "expected a positive number"),
        (("plan", "apps.plans:mixed", "--price-per-hour", "cheap"), "got 'cheap'"),
        (("scheduler", "crontab", "--plan", "apps.plans:mixed", "--every", "5m"),
         "not allowed with argument"),
    ],
)  # fmt: skip
def test_bad_input_is_one_clear_line(args: tuple[str, ...], expected: str) -> None:
    result = run_tickq(*args)
    assert result.returncode in (1, 2) and expected in result.stderr, result.stderr
    assert "Traceback" not in result.stderr


def test_docs_show_a_real_run() -> None:
    """docs/schedulers.md's example output is what `tickq plan` prints for the bookings app."""
    page = (ROOT / "docs" / "schedulers.md").read_text()
    command = "tickq plan examples.bookings.app:q --awake-seconds 60 --price-per-hour 0.05"
    shown = page.split(f"$ {command}\n", 1)[1].split("```", 1)[0]
    result = run_tickq(*command.split()[1:])
    assert result.returncode == 0, result.stderr
    assert re.sub(r"every day of \d+", "", result.stdout) == re.sub(r"every day of \d+", "", shown)


def test_plan_json_is_the_same_plan_as_the_library() -> None:
    from apps.plans import utc

    plan = make_plan(utc)
    assert plan_json("apps.plans:utc")["cron_lines"]["lines"] == list(plan.lines.lines)  # type: ignore[union-attr]
