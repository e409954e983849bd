"""``q.tick()`` on both backends: idempotent slots, catch-up, the summary, health, the CLI."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from conftest import ROOT, run_tickq, tickq_env
from test_web import Receiver
from tickq import FrozenClock, JobContext, Queue
from tickq.store import ScheduleMove
from tickq.tick import strict_problems

T0 = datetime(2026, 5, 4, 8, 59, 30, tzinfo=UTC)  # a Monday, just before 09:00 UTC


def at(hour: int, minute: int = 0, second: int = 0, day: int = 4) -> datetime:
    return datetime(2026, 5, day, hour, minute, second, tzinfo=UTC)


def slot_jobs(q: Queue, job_type: str) -> list[Any]:
    return sorted(q.list_jobs(type=job_type, limit=1000), key=lambda j: j.id)


@pytest.fixture
def ran() -> list[dict[str, Any]]:
    return []


def test_a_due_slot_is_enqueued_once_and_runs_as_an_ordinary_job(
    frozen_queue: Queue, clock: FrozenClock, ran: list[dict[str, Any]]
) -> None:
    q = frozen_queue

    @q.schedule("0 9 * * *")
    def morning_report(ctx: JobContext) -> None:
        ran.append({"id": ctx.id, **ctx.meta})

    clock.set(T0)
    first = q.tick()
    assert first["schedules_enqueued"] == []
    assert first["next_due_at"] == "2026-05-04T09:00:00+00:00"
    clock.set(at(9, 0, 20))
    summary = q.tick()
    job_id = summary["schedules_enqueued"][0]["job_id"]
    assert summary["schedules_enqueued"] == [
        {
            "name": "morning_report",
            "slot": "2026-05-04T09:00:00+00:00",
            "missed": 0,
            "job_id": job_id,
        }
    ]
    assert summary["jobs"]["claimed"] == summary["jobs"]["succeeded"] == 1
    assert summary["remaining_due"] == 0
    assert summary["next_due_at"] == "2026-05-05T09:00:00+00:00"
    assert summary["ticked_at"] == "2026-05-04T09:00:20+00:00"
    assert json.loads(json.dumps(summary)) == summary
    assert ran == [
        {
            "id": job_id,
            "schedule": "morning_report",
            "slot": "2026-05-04T09:00:00+00:00",
            "missed": 0,
        }
    ]
    job = q.get_job(job_id)
    assert job is not None and job.unique_key == "schedule:morning_report:2026-05-04T09:00:00+00:00"
    for _ in range(3):  # the scheduler calls again in the same minute
        clock.advance(seconds=10)
        assert q.tick()["schedules_enqueued"] == []
    assert len(ran) == 1 and len(slot_jobs(q, "morning_report")) == 1


def test_after_a_long_sleep_latest_runs_once_and_knows_what_it_missed(
    frozen_queue: Queue, clock: FrozenClock, ran: list[dict[str, Any]]
) -> None:
    q = frozen_queue

    @q.schedule("*/15 * * * *")
    def send_booking_reminders(ctx: JobContext) -> None:
        ran.append(ctx.meta)

    clock.set(at(9, 0, 5))
    q.tick()
    clock.set(at(12, 7))  # slept through 09:15 ... 12:00
    summary = q.tick()
    assert [(e["slot"], e["missed"]) for e in summary["schedules_enqueued"]] == [
        ("2026-05-04T12:00:00+00:00", 11)
    ]
    assert ran[-1] == {
        "schedule": "send_booking_reminders",
        "slot": "2026-05-04T12:00:00+00:00",
        "missed": 11,
    }
    assert len(slot_jobs(q, "send_booking_reminders")) == 2


def test_catch_up_all_runs_each_missed_slot_once_oldest_first_up_to_the_bound(
    frozen_queue: Queue, clock: FrozenClock, ran: list[dict[str, Any]]
) -> None:
    q = frozen_queue

    @q.schedule(every=timedelta(hours=1), catch_up="all", max_catch_up=5)
    def hourly_sync(ctx: JobContext) -> None:
        ran.append(ctx.meta)

    clock.set(at(9, 0, 5))
    q.tick()
    clock.set(at(12, 30))  # 10:00, 11:00, 12:00 missed
    summary = q.tick()
    assert [e["slot"][11:16] for e in summary["schedules_enqueued"]] == ["10:00", "11:00", "12:00"]
    assert [m["slot"][11:16] for m in ran] == ["09:00", "10:00", "11:00", "12:00"]
    clock.set(at(21, 30))  # nine more missed: only the latest five run
    summary = q.tick()
    assert [e["slot"][11:16] for e in summary["schedules_enqueued"]] == [
        "17:00",
        "18:00",
        "19:00",
        "20:00",
        "21:00",
    ]
    assert summary["schedules_enqueued"][0]["missed"] == 4
    assert summary["jobs"]["succeeded"] == 5
    assert Counter(m["slot"] for m in ran).most_common(1)[0][1] == 1


@pytest.mark.parametrize(
    ("start", "expected"),
    [
        # Spring forward (29 March): 02:30 does not exist, it runs at 03:00 CEST.
        (datetime(2026, 3, 28, 12, tzinfo=UTC),
         [("half_past_two", "2026-03-29T01:00:00+00:00"), ("nine", "2026-03-29T07:00:00+00:00")]),
        # Fall back (25 October): 02:30 happens twice, it runs once, at the first (CEST).
        (datetime(2026, 10, 24, 12, tzinfo=UTC),
         [("half_past_two", "2026-10-25T00:30:00+00:00"), ("nine", "2026-10-25T08:00:00+00:00")]),
    ],
    ids=["spring-forward", "fall-back"],
)  # fmt: skip
def test_ticking_through_a_clock_change_runs_each_local_time_once(
    frozen_queue: Queue, clock: FrozenClock, start: datetime, expected: list[tuple[str, str]]
) -> None:
    q = frozen_queue
    runs: list[tuple[str, str, int]] = []

    def record(ctx: JobContext) -> None:
        runs.append((ctx.meta["schedule"], ctx.meta["slot"], ctx.meta["missed"]))

    q.schedule("30 2 * * *", tz="Europe/Berlin", name="half_past_two")(q.job(name="a")(record))
    q.schedule("0 9 * * *", tz="Europe/Berlin", name="nine")(q.job(name="b")(record))
    clock.set(start)
    for _ in range(4 * 36):  # a scheduler calling every 15 minutes for 36 hours
        clock.advance(minutes=15)
        q.tick()
    assert runs == [(name, slot, 0) for name, slot in expected]


def test_a_pruned_slot_never_runs_again(
    frozen_queue: Queue, clock: FrozenClock, ran: list[dict[str, Any]]
) -> None:
    q = frozen_queue

    @q.schedule("0 9 * * *")
    def morning_report(ctx: JobContext) -> None:
        ran.append(ctx.meta)

    clock.set(at(9, 0, 5))
    assert len(q.tick()["schedules_enqueued"]) == 1
    clock.advance(seconds=30)
    assert q.prune(older_than=timedelta(0)) == 1  # the done job is gone, unique key too
    clock.advance(seconds=30)
    assert q.tick()["schedules_enqueued"] == []
    assert len(ran) == 1 and slot_jobs(q, "morning_report") == []


def test_a_new_schedule_runs_a_slot_just_missed_but_not_old_history(
    frozen_queue: Queue, clock: FrozenClock, ran: list[dict[str, Any]]
) -> None:
    q = frozen_queue

    @q.schedule("0 9 * * *")  # deployed at 09:10: today's run is 10 minutes late, run it
    def recent(ctx: JobContext) -> None:
        ran.append(ctx.meta)

    @q.schedule("0 6 * * *")  # 3 hours ago: beyond max_delay, wait for tomorrow
    def old(ctx: JobContext) -> None:
        ran.append(ctx.meta)

    clock.set(at(9, 10))
    assert [e["name"] for e in q.tick()["schedules_enqueued"]] == ["recent"]
    # Ticks an hour apart (longer than max_delay) still see every slot of a known schedule.
    clock.set(at(6, 40, day=5))
    assert [e["name"] for e in q.tick()["schedules_enqueued"]] == ["old"]
    clock.set(at(9, 40, day=5))
    assert [e["name"] for e in q.tick()["schedules_enqueued"]] == ["recent"]
    assert [m["schedule"] for m in ran] == ["recent", "old", "recent"]


def test_a_new_apps_first_tick_reports_no_missed_slots(
    frozen_queue: Queue, clock: FrozenClock, ran: list[dict[str, Any]]
) -> None:
    """Slots from before a schedule existed were never missed: the first tick runs the latest
    one within max_delay (whatever catch_up says) with missed=0; later sleeps count."""
    q = frozen_queue

    @q.schedule(every=timedelta(minutes=1), catch_up="all")
    def minutely(ctx: JobContext) -> None:
        ran.append(ctx.meta)

    @q.schedule("*/5 * * * *")
    def five(ctx: JobContext) -> None:
        ran.append(ctx.meta)

    clock.set(at(9, 14, 30))
    first = q.tick()["schedules_enqueued"]
    assert [(e["name"], e["slot"][11:16], e["missed"]) for e in first] == [
        ("minutely", "09:14", 0), ("five", "09:10", 0),
    ]  # fmt: skip
    assert [m["missed"] for m in ran] == [0, 0]
    clock.set(at(9, 40, 30))  # asleep 26 minutes: five's 09:15..09:35 were missed
    later = {e["name"]: e for e in q.tick()["schedules_enqueued"] if e["name"] == "five"}
    assert later["five"]["slot"][11:16] == "09:40" and later["five"]["missed"] == 5


def test_a_tick_that_lost_the_race_enqueues_nothing(
    frozen_queue: Queue, clock: FrozenClock
) -> None:
    q = frozen_queue

    @q.schedule("*/15 * * * *")
    def quarter() -> None: ...

    clock.set(at(9, 0, 5))
    q.tick()
    clock.set(at(9, 15, 5))
    seen = q._store.tick_state()  # two ticks read the same cursor...
    assert seen.cursors["quarter"] == at(9)
    assert len(q.enqueue_schedules()) == 1  # ...one moves it first
    job = q._new_job(
        "quarter", {}, run_after=at(9, 15), unique_key="schedule:quarter:x", unique_scope="all"
    )
    late = ScheduleMove("quarter", seen.cursors["quarter"], at(9, 15), at(9, 15), [job])
    assert q._store.enqueue_schedules([late]) == [None]
    assert len(slot_jobs(q, "quarter")) == 2  # 09:00 and 09:15, nothing from the loser
    first_sight = ScheduleMove("quarter", None, at(9, 15), None, [])
    assert q._store.enqueue_schedules([first_sight]) == [None]  # it exists: no reset


def test_a_failing_scheduled_job_retries_without_its_slot_coming_back(
    frozen_queue: Queue, clock: FrozenClock, ran: list[dict[str, Any]]
) -> None:
    q = frozen_queue

    @q.schedule("0 9 * * *")
    @q.job(max_attempts=2, backoff=(60,))
    def flaky(ctx: JobContext) -> None:
        ran.append({"attempt": ctx.attempt})
        if ctx.attempt == 1:
            raise RuntimeError("provider down")

    clock.set(at(9, 0, 5))
    first = q.tick()
    assert first["jobs"]["retried"] == 1
    assert first["remaining_due"] == 0 and first["next_due_at"] == "2026-05-04T09:01:05+00:00"
    clock.advance(minutes=2)
    second = q.tick()
    assert second["schedules_enqueued"] == [] and second["jobs"]["succeeded"] == 1
    assert ran == [{"attempt": 1}, {"attempt": 2}]


def test_summary_counts_what_is_left_for_the_next_call(
    frozen_queue: Queue, clock: FrozenClock
) -> None:
    q = frozen_queue

    @q.job()
    def resize_image(n: int) -> None: ...

    clock.set(at(9))
    q.enqueue_many([("resize_image", {"n": n}) for n in range(5)])
    q.enqueue("resize_image", {"n": 99}, run_after=timedelta(minutes=30))
    clock.advance(minutes=10)
    summary = q.tick(limit=2)
    assert summary["jobs"]["claimed"] == 2
    assert summary["remaining_due"] == 3
    assert summary["oldest_due_age_seconds"] == 600
    assert summary["next_due_at"] == "2026-05-04T09:00:00+00:00"  # work is already waiting
    assert strict_problems(summary, timedelta(minutes=5))[0].startswith(
        "the oldest due job has waited 600s"
    )
    assert strict_problems(summary, timedelta(hours=1)) == []
    rest = q.tick(limit=100)
    assert rest["remaining_due"] == 0 and rest["oldest_due_age_seconds"] is None
    assert rest["next_due_at"] == "2026-05-04T09:30:00+00:00"


def test_a_tick_starts_no_job_after_its_time_budget_and_leaves_the_rest(
    frozen_queue: Queue, clock: FrozenClock
) -> None:
    q = frozen_queue

    @q.job()
    def slow_report(n: int) -> None:
        clock.advance(seconds=0.2)  # the budget reads the injected clock: no sleeping

    ids = q.enqueue_many([("slow_report", {"n": n}) for n in range(10)])
    summary = q.tick(limit=100, time_budget=0.3)
    done = summary["jobs"]["succeeded"]
    assert done == 2  # the second starts at 0.2 s, within the budget; the third would not
    # Jobs claimed ahead and not started go back as if never claimed: uncounted, no history.
    assert summary["jobs"]["claimed"] == done and summary["jobs"]["released"] == 0
    assert summary["remaining_due"] == 10 - done
    left = [j for j in map(q.get_job, ids) if j is not None and j.status != "done"]
    assert len(left) == 10 - done
    assert all(j.status == "pending" and j.attempts == 0 and j.lease_owner is None
               for j in left), left  # fmt: skip
    assert all(q.attempts(j.id) == [] for j in left)
    assert q.tick(limit=100, time_budget=10)["jobs"]["succeeded"] == 10 - done


def test_strict_reports_new_permanent_failures(frozen_queue: Queue, clock: FrozenClock) -> None:
    q = frozen_queue

    @q.job(max_attempts=1)
    def explode() -> None:
        raise RuntimeError("boom")

    explode.enqueue()
    summary = q.tick()
    assert summary["jobs"]["failed"] == 1
    assert strict_problems(summary, timedelta(hours=1)) == [
        "1 job(s) failed permanently in this tick"
    ]


def test_health_goes_stale_after_twice_the_expected_interval(
    frozen_queue: Queue, clock: FrozenClock
) -> None:
    q = frozen_queue
    never = q.health(timedelta(minutes=15))
    assert (never["ok"], never["status"], never["last_tick_at"]) == (False, "no_tick_yet", None)
    clock.set(at(9))
    q.tick()
    clock.advance(minutes=30)
    fresh = q.health(timedelta(minutes=15))
    assert (fresh["ok"], fresh["status"], fresh["age_seconds"]) == (True, "ok", 1800)
    clock.advance(seconds=1)
    stale = q.health(timedelta(minutes=15))
    assert (stale["ok"], stale["status"], stale["ticks"]) == (False, "stale", 1)
    assert "60 days" in stale["message"] and stale["last_tick_at"] == "2026-05-04T09:00:00+00:00"


def test_an_empty_tick_takes_two_round_trips_on_postgres(
    pg_schema_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    q = Queue(pg_schema_url)  # the database's own clock, as in production
    q.migrate()

    @q.schedule("0 0 1 1 *")
    def new_year() -> None: ...

    q.tick()  # the first tick stores the schedule's cursor
    calls: list[str] = []
    for name in ("_query", "_query_many"):
        original = getattr(q._store, name)
        monkeypatch.setattr(
            q._store, name, lambda *a, _o=original, _n=name, **k: (calls.append(_n), _o(*a, **k))[1]
        )
    summary = q.tick()
    assert summary["jobs"]["claimed"] == 0 and summary["remaining_due"] == 0
    assert summary["next_due_at"] is not None and summary["next_due_at"].endswith("+00:00")
    assert len(calls) == 2, calls  # tick state (pipelined with its record); rescue + claim
    q.close()


# -- processes and the CLI ------------------------------------------------------------------
def tick_env(db_url: str, out: Path, now: datetime, **extra: str) -> dict[str, str]:
    return {
        "TICKQ_DATABASE_URL": db_url,
        "TICKQ_TEST_OUT": str(out),
        "TICKQ_TEST_NOW": now.isoformat(),
        **extra,
    }


def test_four_processes_ticking_at_once_enqueue_and_run_each_slot_once(
    db_url: str, tmp_path: Path
) -> None:
    Queue(db_url).migrate()
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "tickq", "tick", "apps.ticking:q"],
            cwd=ROOT,
            env=tickq_env(**tick_env(db_url, tmp_path, at(9, 0, 5))),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(4)
    ]
    outputs = [p.communicate(timeout=60) for p in procs]
    assert all(p.returncode == 0 for p in procs), [err for _, err in outputs]
    enqueued = [e for out, _ in outputs for e in json.loads(out)["schedules_enqueued"]]
    assert sorted(e["slot"] for e in enqueued) == ["2026-05-04T09:00:00+00:00"] * 2  # 2 schedules
    lines = [ln for f in tmp_path.glob("executions-*.txt") for ln in f.read_text().splitlines()]
    assert sorted(lines) == ["daily 2026-05-04T09:00:00+00:00", "quarter 2026-05-04T09:00:00+00:00"]


def test_cli_tick_prints_the_summary_and_strict_fails_on_failures(
    db_url: str, tmp_path: Path
) -> None:
    Queue(db_url).migrate()
    env = tick_env(db_url, tmp_path, at(9, 0, 5))
    result = run_tickq("tick", "apps.ticking:q", "--limit", "10", **env)
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    assert summary["jobs"]["succeeded"] == 2 and "strict" not in summary
    env["TICKQ_TEST_EXPLODE"] = "1"
    strict = run_tickq("tick", "apps.ticking:q", "--strict", **env)
    assert strict.returncode == 1, strict.stderr
    assert json.loads(strict.stdout)["strict"] == {
        "ok": False,
        "problems": ["1 job(s) failed permanently in this tick"],
    }
    with Receiver() as receiver:
        pinged = run_tickq("tick", "apps.ticking:q", TICKQ_HEARTBEAT_URL=receiver.url, **env)
        assert pinged.returncode == 0, pinged.stderr
    [(path, body)] = receiver.received
    assert path == "/ping/abc-123" and json.loads(body) == json.loads(pinged.stdout)
    bad = run_tickq("tick", "apps.ticking:q", "--limit", "-1", **env)
    assert (
        bad.returncode == 1 and bad.stderr.strip() == "tickq: error: --limit must be >= 0, got -1"
    )
    wait = run_tickq("tick", "apps.ticking:q", "--strict", "--max-wait", "soon", **env)
    assert wait.returncode == 2 and "expected a duration like 90s" in wait.stderr
