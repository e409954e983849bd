"""``raise Snooze(seconds)``: a job that waits without failing, on both backends.

A snooze gives the attempt back (a ``max_attempts=1`` job may snooze and still run), is
counted in ``ctx.snoozes``, the reports and the history as ``snoozed`` (never a failure),
and is bounded by ``max_snooze``: past it the job fails, and the failure hooks run."""

from __future__ import annotations

import logging
import math
from datetime import timedelta
from typing import Any

import pytest

from tickq import ConfigurationError, FrozenClock, JobContext, JobState, Queue, Snooze


def test_snoozes_use_no_attempt_and_the_job_counts_them(
    frozen_queue: Queue, clock: FrozenClock
) -> None:
    q, seen = frozen_queue, []

    @q.job(max_attempts=1)
    def poll(ctx: JobContext) -> str:
        seen.append((ctx.attempt, ctx.max_attempts, ctx.snoozes))
        if ctx.snoozes < 3:
            raise Snooze(60)
        return "ready"

    job_id = poll.enqueue()
    reports = []
    for _ in range(4):
        reports.append(q.process_jobs())
        assert q.process_jobs()["claimed"] == 0  # not due again before its minute is up
        clock.advance(seconds=60)
    assert seen == [(1, 1, 0), (1, 1, 1), (1, 1, 2), (1, 1, 3)]
    assert [r["snoozed"] for r in reports] == [1, 1, 1, 0]
    assert [r["succeeded"] for r in reports] == [0, 0, 0, 1]
    assert all(r["failed"] == r["retried"] == 0 for r in reports)
    job = q.get_job(job_id)
    assert job is not None and job.status is JobState.DONE and job.result == "ready"
    assert (job.attempts, job.max_attempts, job.snoozes) == (1, 1, 3)
    history = [(a.attempt, a.outcome, a.error) for a in q.attempts(job_id)]
    assert history == [(1, "snoozed", None)] * 3 + [(1, "done", None)]


def test_a_snoozed_job_waits_as_a_row_and_the_tick_says_when_it_comes_due(
    frozen_queue: Queue, clock: FrozenClock
) -> None:
    q = frozen_queue

    @q.job()
    def wait_for_export() -> None:
        raise Snooze(timedelta(minutes=20))

    job_id = wait_for_export.enqueue()
    summary = q.tick()
    assert summary["jobs"]["snoozed"] == 1 and summary["jobs"]["claimed"] == 1
    job = q.get_job(job_id)
    assert job is not None and job.status is JobState.PENDING and job.attempts == 0
    assert job.lease_owner is None and job.run_after == clock.now() + timedelta(minutes=20)
    assert summary["next_due_at"] == job.run_after.isoformat()
    assert summary["remaining_due"] == 0
    clock.advance(minutes=19)
    assert q.tick()["jobs"]["claimed"] == 0
    clock.advance(minutes=1)  # the first tick after its time runs it
    assert q.tick()["jobs"]["snoozed"] == 1


def test_snoozing_past_max_snooze_fails_the_job_and_alerts(
    frozen_queue: Queue, clock: FrozenClock
) -> None:
    q, failed, retried = frozen_queue, [], []
    q.on_failure(failed.append)
    q.on_retry(retried.append)

    @q.job(max_snooze=timedelta(hours=1))
    def never_ready() -> None:
        raise Snooze(25 * 60)

    job_id = never_ready.enqueue()
    first = clock.now()
    waits = []
    while (report := q.process_jobs())["snoozed"]:
        job = q.get_job(job_id)
        assert job is not None
        waits.append((job.run_after - clock.now()).total_seconds())
        clock.advance(seconds=waits[-1])
    assert report["failed"] == 1
    # 25 min, 25 min, then the last snooze is cut short so it runs once more at the hour
    assert waits == [1500, 1500, 600]
    assert clock.now() == first + timedelta(hours=1)
    job = q.get_job(job_id)
    assert job is not None and job.status is JobState.FAILED and job.snoozes == 3
    assert job.last_error is not None
    assert job.last_error.startswith("SnoozeLimitExceeded: ")
    assert "max_snooze of 1:00:00" in job.last_error and "snoozed 3 time(s)" in job.last_error
    assert [j.id for j in failed] == [job_id] and retried == []
    outcomes = [a.outcome for a in q.attempts(job_id)]
    assert outcomes == ["snoozed", "snoozed", "snoozed", "error"]
    assert q.stats()["failed_attempts_last_hour"] == 1  # the snoozes are not failures


def test_max_snooze_none_snoozes_without_bound(frozen_queue: Queue, clock: FrozenClock) -> None:
    q = frozen_queue

    @q.job(max_snooze=None)
    def patient() -> None:
        raise Snooze(timedelta(days=30))

    job_id = patient.enqueue()
    for _ in range(3):
        assert q.process_jobs()["snoozed"] == 1
        clock.advance(days=30)
    job = q.get_job(job_id)
    assert job is not None and job.status is JobState.PENDING and job.snoozes == 3


def test_the_default_max_snooze_is_a_day(frozen_queue: Queue, clock: FrozenClock) -> None:
    q = frozen_queue

    @q.job()
    def hourly_look() -> None:
        raise Snooze(3600)

    job_id = hourly_look.enqueue()
    for _ in range(24):
        assert q.process_jobs()["snoozed"] == 1
        clock.advance(hours=1)
    assert q.process_jobs()["failed"] == 1
    job = q.get_job(job_id)
    assert job is not None and job.status is JobState.FAILED and job.snoozes == 24


def test_max_snooze_counts_from_the_first_snooze_not_the_enqueue(
    frozen_queue: Queue, clock: FrozenClock
) -> None:
    q = frozen_queue

    @q.job(max_snooze=timedelta(hours=1))
    def later() -> None:
        raise Snooze(600)

    job_id = later.with_options(run_after=timedelta(days=3)).enqueue()
    clock.advance(days=3)
    assert q.process_jobs()["snoozed"] == 1
    job = q.get_job(job_id)
    assert job is not None and job.snoozed_since == clock.now()


def test_a_retry_by_hand_gives_a_failed_snoozer_a_new_max_snooze(
    frozen_queue: Queue, clock: FrozenClock
) -> None:
    q, ready = frozen_queue, []

    @q.job(max_snooze=timedelta(minutes=10))
    def waits(ctx: JobContext) -> str:
        if not ready:
            raise Snooze(600)
        return f"done after {ctx.snoozes} snoozes"

    job_id = waits.enqueue()
    q.process_jobs()
    clock.advance(minutes=10)
    assert q.process_jobs()["failed"] == 1
    q.retry(job_id)
    assert q.process_jobs()["snoozed"] == 1  # not failed at once: its wait starts again
    ready.append(True)
    clock.advance(minutes=10)
    assert q.process_jobs()["succeeded"] == 1
    job = q.get_job(job_id)
    assert job is not None and job.result == "done after 2 snoozes"


def test_snooze_and_retry_differ_only_in_what_they_count(
    frozen_queue: Queue, clock: FrozenClock, caplog: pytest.LogCaptureFixture
) -> None:
    from tickq import Retry

    q, retried = frozen_queue, []
    q.on_retry(retried.append)
    q.job(name="snoozes", max_attempts=2)(lambda: (_ for _ in ()).throw(Snooze(30)))
    q.job(name="retries", max_attempts=2)(lambda: (_ for _ in ()).throw(Retry(30)))
    snoozer, retrier = q.enqueue("snoozes", {}), q.enqueue("retries", {})
    with caplog.at_level(logging.INFO, logger="tickq"):
        report = q.process_jobs()
    assert (report["snoozed"], report["retried"]) == (1, 1)
    s, r = q.get_job(snoozer), q.get_job(retrier)
    assert s is not None and r is not None
    assert (s.attempts, s.snoozes, s.last_error) == (0, 1, None)
    assert r.attempts == 1 and r.last_error is not None and r.last_error.startswith("Retry:")
    assert s.run_after == r.run_after == clock.now() + timedelta(seconds=30)
    assert [j.id for j in retried] == [retrier]  # a snooze is not a failed attempt
    levels = {rec.outcome: rec.levelno for rec in caplog.records if hasattr(rec, "outcome")}
    assert levels == {"snoozed": logging.INFO, "retried": logging.WARNING}


def test_async_jobs_snooze_too(frozen_queue: Queue, clock: FrozenClock) -> None:
    q = frozen_queue

    @q.job(max_attempts=1)
    async def poll_async(ctx: JobContext) -> int:
        if ctx.snoozes < 2:
            raise Snooze(1)
        return ctx.snoozes

    job_id = poll_async.enqueue()
    for _ in range(3):
        q.process_jobs()
        clock.advance(seconds=1)
    job = q.get_job(job_id)
    assert job is not None and job.status is JobState.DONE and job.result == 2


@pytest.mark.parametrize(
    ("value", "error", "message"),
    [
        (-1, ValueError, r"Snooze seconds must be a finite number >= 0, got -1"),
        (math.nan, ValueError, r"finite number >= 0, got nan"),
        (math.inf, ValueError, r"finite number >= 0, got inf"),
        (timedelta(seconds=-5), ValueError, r"got -5.0"),
        ("600", TypeError, r"takes a number of seconds or a timedelta, got str: '600'"),
        (None, TypeError, r"got NoneType: None"),
        (True, TypeError, r"got bool: True"),
    ],
)
def test_bad_snooze_seconds_are_clear_errors(value: Any, error: type, message: str) -> None:
    with pytest.raises(error, match=message):
        Snooze(value)


def test_snooze_takes_seconds_or_a_timedelta() -> None:
    assert Snooze(0).seconds == 0.0 and Snooze(2.5).seconds == 2.5
    assert Snooze(timedelta(minutes=2)).seconds == 120.0
    assert str(Snooze(90)) == "snoozed for 90s"


def test_a_job_raising_a_bad_snooze_fails_its_attempt_and_says_why(
    frozen_queue: Queue,
) -> None:
    q = frozen_queue

    @q.job(max_attempts=1)
    def confused() -> None:
        raise Snooze(-10)

    job_id = confused.enqueue()
    assert q.process_jobs()["failed"] == 1
    job = q.get_job(job_id)
    assert job is not None and job.last_error is not None
    assert job.last_error.startswith("ValueError: Snooze seconds must be a finite number >= 0")


@pytest.mark.parametrize(
    ("value", "error", "message"),
    [
        (timedelta(0), ConfigurationError, r"max_snooze must be a positive timedelta, got"),
        (timedelta(seconds=-1), ConfigurationError, r"pass None to let the job snooze"),
        (3600, TypeError, r"max_snooze must be a timedelta \(or None for no bound\), got int"),
    ],
)
def test_bad_max_snooze_is_refused_at_decoration(
    frozen_queue: Queue, value: Any, error: type, message: str
) -> None:
    with pytest.raises(error, match=message):
        frozen_queue.job(max_snooze=value)(lambda: None)
    assert frozen_queue.job_names() == []


def test_the_job_page_shows_snoozes_as_waits(frozen_queue: Queue, clock: FrozenClock) -> None:
    from tickq.dashboard.views import timeline

    q = frozen_queue
    q.job(name="w")(lambda: (_ for _ in ()).throw(Snooze(60)))
    job_id = q.enqueue("w", {})
    q.process_jobs()
    job = q.get_job(job_id)
    assert job is not None
    events = timeline(job, [{"a": a} for a in q.attempts(job_id)])
    kinds = [(e["what"], e["kind"]) for e in events]
    assert ("attempt 1: snoozed", "pending") in kinds
    assert kinds[-1] == ("next attempt due", "pending")
    assert not any(kind == "failed" for _, kind in kinds)


def test_a_database_at_schema_8_keeps_its_history_through_migration_11(db_url: str) -> None:
    from tickq.store.migrate import migrate
    from tickq.store.queries import migrations

    q = Queue(db_url, clock=FrozenClock(), strict=False)
    migrate(q._store, [m for m in migrations(q._store.dialect) if m[0] <= 8])
    # The row as schema 8 held it (an enqueue now writes columns of later schemas).
    raw_sql(q, "INSERT INTO tickq_jobs (type, queue, payload, priority, max_attempts, run_after,"
               " created_at, updated_at) VALUES ('t', 'default', '{}', 0, 4, "
               "'2026-01-05T09:00:00+00:00', '2026-01-05T09:00:00+00:00', "
               "'2026-01-05T09:00:00+00:00')")  # fmt: skip
    raw_sql(q, "UPDATE tickq_jobs SET status = 'failed', attempts = 1, "
               "attempted_at = run_after, finished_at = run_after")  # fmt: skip
    raw_sql(q, "INSERT INTO tickq_attempts (job_id, attempt, started_at, finished_at, outcome,"
               " error) SELECT id, 1, attempted_at, finished_at, 'error', 'E: old' "
               "FROM tickq_jobs")  # fmt: skip
    assert 11 in q.migrate()
    [job_id] = [job.id for job in q.list_jobs()]
    [attempt] = q.attempts(job_id)
    assert (attempt.attempt, attempt.outcome, attempt.error) == (1, "error", "E: old")
    job = q.get_job(job_id)
    assert job is not None and (job.snoozes, job.snoozed_since) == (0, None)
    q.retry(job_id)
    q.job(name="t", max_attempts=3)(lambda: (_ for _ in ()).throw(ValueError("new")))
    q.process_jobs()  # attempt 2's row goes in beside the old one
    assert [(a.attempt, a.error_message) for a in q.attempts(job_id)] == [(1, "old"), (2, "new")]
    q.close()


def raw_sql(q: Queue, sql: str) -> None:
    """Run SQL on tickq's own (autocommit) connection."""
    q._store._connection().execute(sql)


def test_only_a_snooze_past_max_snooze_alerts(
    db_url: str, clock: FrozenClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Alerts through a real webhook: a job snoozing within its bound alerts nobody, however
    often; the one that runs out of ``max_snooze`` is alerted, with its error."""
    from receivers import http_receiver
    from tickq.alerts import Alerts, Webhook

    for name in ("TICKQ_ALERT_WEBHOOK_URL", "TICKQ_ALERT_EMAIL_TO", "TICKQ_SMTP_URL"):
        monkeypatch.delenv(name, raising=False)
    window = timedelta(minutes=10)
    with http_receiver() as http:
        q = Queue(db_url, clock=clock, alerts=Alerts([Webhook(http.url)], window=window))
        q.migrate()
        q.job(name="patient", max_snooze=None)(lambda: (_ for _ in ()).throw(Snooze(60)))
        q.job(name="hasty", max_snooze=timedelta(minutes=2))(
            lambda: (_ for _ in ()).throw(Snooze(60))
        )
        patient, hasty = q.enqueue("patient", {}), q.enqueue("hasty", {})
        for _ in range(30):  # three alert windows of snoozing, once a minute
            q.process_jobs()
            clock.advance(minutes=1)
        q.close()
    [alert] = [r.json() for r in http.requests]
    assert (alert["job_type"], alert["failed_jobs"], alert["job_ids"]) == ("hasty", 1, [hasty])
    assert alert["last_error"].startswith("SnoozeLimitExceeded: ")
    job = q.get_job(patient)
    assert job is not None and job.status is JobState.PENDING and job.snoozes == 30
