"""Django's Tasks API on tickq, against this project's real database (SQLite or Postgres)."""

import asyncio
import io
import json
import os
import time
from datetime import timedelta

import pytest
from bookings.models import Booking, SentEmail, User
from bookings.tasks import send_booking_reminders, send_welcome_email
from django.conf import settings
from django.core.management import call_command
from django.db import transaction
from django.test import Client
from django.utils import timezone

from dj_tests import tasks
from tickq import JobContext
from tickq.contrib.django import TickqBackend, queue
from tickq.contrib.django.compat import (
    InvalidTask,
    TaskResultDoesNotExist,
    TaskResultStatus,
    task_backends,
    task_finished,
)

pytestmark = pytest.mark.django_db(transaction=True)
SECRET = "s3cret-token-for-the-tick-0123456789"


def burst(*args: str) -> str:
    out = io.StringIO()
    call_command("tickq_worker", "--burst", *args, stdout=out)
    return out.getvalue()


def test_the_backend_says_what_it_supports() -> None:
    backend = task_backends["default"]
    assert isinstance(backend, TickqBackend)
    assert backend.supports_defer and backend.supports_async_task
    assert backend.supports_get_result and backend.supports_priority


def test_enqueue_inside_atomic_then_raise_leaves_no_job() -> None:
    with pytest.raises(RuntimeError), transaction.atomic():
        User.objects.create(email="a@example.com")
        result = send_welcome_email.enqueue("a@example.com")
        raise RuntimeError("the signup failed after the enqueue")
    assert not User.objects.exists()
    assert queue().get_job(int(result.id)) is None
    with pytest.raises(TaskResultDoesNotExist):
        send_welcome_email.get_result(result.id)


def test_enqueue_inside_atomic_commits_with_the_data() -> None:
    with transaction.atomic():
        User.objects.create(email="b@example.com")
        result = send_welcome_email.enqueue("b@example.com")
        assert queue().get_job(int(result.id)) is None  # tickq's own connection: not yet
    assert result.status == TaskResultStatus.READY
    stored = send_welcome_email.get_result(result.id)
    assert stored.status == TaskResultStatus.READY and stored.args == ["b@example.com"]
    assert queue().get_job(int(result.id)).queue == "emails"  # type: ignore[union-attr]


def test_enqueue_outside_a_transaction_commits_at_once() -> None:
    result = send_welcome_email.enqueue("c@example.com")
    assert queue().get_job(int(result.id)) is not None


def test_the_worker_command_runs_it_and_the_result_is_successful() -> None:
    result = send_welcome_email.enqueue("d@example.com")
    assert "succeeded=1" in burst("--queues", "emails")
    result.refresh()
    assert result.status == TaskResultStatus.SUCCESSFUL
    assert result.return_value == {"to": "d@example.com", "sent": True}
    assert result.attempts == 1 and result.errors == []
    assert result.enqueued_at <= result.started_at <= result.finished_at  # type: ignore[operator]
    assert result.last_attempted_at == result.started_at
    assert SentEmail.objects.filter(key="welcome:d@example.com").count() == 1


def test_a_failing_task_retries_and_ends_failed_with_its_traceback() -> None:
    result = tasks.always_fails.enqueue(42)
    report = burst()
    assert "retried=1" in report and "failed=1" in report
    result.refresh()
    assert result.status == TaskResultStatus.FAILED and result.attempts == 2
    assert [e.exception_class for e in result.errors] == [tasks.PaymentDeclined] * 2
    assert result.errors[0].exception_class_path == "dj_tests.tasks.PaymentDeclined"
    assert 'raise PaymentDeclined(f"card declined for {amount}")' in result.errors[-1].traceback
    assert "card declined for 42" in result.errors[-1].traceback
    with pytest.raises(ValueError, match="Task failed"):
        result.return_value  # noqa: B018


def test_failure_hooks_alert_when_a_task_ends_failed() -> None:
    failed: list[int] = []
    q = queue()
    q.on_failure(lambda job: failed.append(job.id))
    try:
        result = tasks.always_fails.enqueue(1)
        burst()
    finally:
        q._runtime.failure_hooks.clear()
    assert failed == [int(result.id)]


def test_task_finished_is_sent_once_the_end_is_recorded() -> None:
    seen: list[tuple[str, object, int]] = []

    def receiver(sender: object, task_result: object, **kwargs: object) -> None:
        seen.append((task_result.id, task_result.status, task_result.attempts))  # type: ignore[attr-defined]

    task_finished.connect(receiver)
    try:
        ok = send_welcome_email.enqueue("f@example.com")
        failing = tasks.always_fails.enqueue(7)
        burst()
    finally:
        task_finished.disconnect(receiver)
    # Sent once for each task's end (not for the retried attempt), reading as it stays; other
    # jobs the run finished (the example enqueues more) get theirs too.
    ours = [entry for entry in seen if entry[0] in (ok.id, failing.id)]
    assert sorted(ours) == sorted(
        [(ok.id, TaskResultStatus.SUCCESSFUL, 1), (failing.id, TaskResultStatus.FAILED, 2)]
    )


def test_takes_context_receives_djangos_task_context() -> None:
    result = tasks.knows_its_context.enqueue(label="x")
    burst()
    result.refresh()
    assert result.return_value == {"id": result.id, "attempt": 1, "label": "x"}


def test_async_tasks_and_the_async_api() -> None:
    async def scenario() -> object:
        from asgiref.sync import sync_to_async

        result = await tasks.adds_later.aenqueue(2, b=3)
        await sync_to_async(burst)()
        return await tasks.adds_later.aget_result(result.id)

    result = asyncio.run(scenario())
    assert result.status == TaskResultStatus.SUCCESSFUL and result.return_value == 5


def test_return_values_are_json_normalised() -> None:
    result = tasks.returns_a_tuple.enqueue()
    burst()
    assert tasks.returns_a_tuple.get_result(result.id).return_value == [1, "two"]


def test_typed_arguments_are_converted_checked_and_rebuilt() -> None:
    from datetime import UTC, date, datetime
    from decimal import Decimal

    stay, at = tasks.Stay(2, date(2026, 7, 1)), datetime(2026, 6, 1, 9, 30, tzinfo=UTC)
    result = tasks.books_a_stay.enqueue(stay, price=Decimal("120.50"), at=at)
    stored = queue().get_job(int(result.id))
    assert stored is not None and stored.payload["args"] == [{"nights": 2, "arrival": "2026-07-01"}]
    assert stored.payload["kwargs"] == {"price": "120.50", "at": "2026-06-01T09:30:00+00:00"}
    burst()
    result.refresh()
    assert result.return_value == {"stay": repr(stay), "price": "Decimal('120.50')",
                                   "at": repr(at), "id": result.id}  # fmt: skip
    with pytest.raises(TypeError, match=r"^payload\.stay\.arrival: expected date, got str"):
        tasks.books_a_stay.enqueue(tasks.Stay(1, "2026-07-01"), price=Decimal(1), at=at)


def test_higher_django_priority_runs_first() -> None:
    low = tasks.low.enqueue(1)
    high = tasks.high.enqueue(2)
    assert queue().get_job(int(high.id)).priority == 100  # type: ignore[union-attr]
    assert queue().process_jobs(limit=1)["succeeded"] == 1
    assert tasks.high.get_result(high.id).status == TaskResultStatus.SUCCESSFUL
    assert tasks.low.get_result(low.id).status == TaskResultStatus.READY


def test_run_after_defers_the_task() -> None:
    later = timezone.now() + timedelta(hours=1)
    result = send_welcome_email.using(run_after=later).enqueue("e@example.com")
    burst()
    assert send_welcome_email.get_result(result.id).status == TaskResultStatus.READY
    assert queue().get_job(int(result.id)).run_after == later  # type: ignore[union-attr]


def test_a_unique_key_keeps_one_pending_job() -> None:
    first = send_welcome_email.using(unique_key="welcome:f").enqueue("f@example.com")
    second = send_welcome_email.using(unique_key="welcome:f").enqueue("f@example.com")
    assert first.id == second.id
    assert send_welcome_email.using(priority=5).unique_key is None


def test_task_options_become_tickq_options() -> None:
    definition = queue()._definition(send_welcome_email.module_path)
    assert definition is not None and definition.max_attempts == 4
    assert [definition.backoff(n) for n in (1, 2, 3)] == [60, 300, 1800]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"queue_name": "nope"}, "Queue 'nope' is not valid"),
        ({"priority": 101}, "priority must be a whole number"),
        ({"run_after": timezone.now().replace(tzinfo=None)}, "aware datetime"),
    ],
)
def test_invalid_tasks_raise_invalid_task(change: dict, message: str) -> None:
    with pytest.raises(InvalidTask, match=message):
        send_welcome_email.using(**change)


def test_bad_tickq_options_raise_invalid_task() -> None:
    from tickq.contrib.django import TickqTask

    def module_level(n: int) -> None: ...

    module_level.__module__, module_level.__qualname__ = __name__, "module_level"
    globals()["module_level"] = module_level
    with pytest.raises(InvalidTask, match="max_attempts"):
        TickqTask(func=module_level, max_attempts=0)


def test_a_task_that_snoozes_uses_no_attempt() -> None:
    result = tasks.waits_twice.enqueue()
    burst()
    result.refresh()
    assert result.status == TaskResultStatus.SUCCESSFUL
    assert (result.return_value, result.attempts, result.errors) == (1, 1, [])
    definition = queue()._definition(tasks.waits_twice.module_path)
    assert definition is not None and definition.max_snooze == timedelta(hours=1)


def test_a_bad_max_snooze_raises_invalid_task() -> None:
    from tickq.contrib.django import TickqTask

    with pytest.raises(InvalidTask, match="max_snooze must be a positive timedelta"):
        TickqTask(func=tasks.returns_a_tuple.func, max_snooze=timedelta(0))


def test_a_timeout_fails_the_attempt() -> None:
    result = tasks.too_slow.enqueue()
    burst()
    result.refresh()
    assert result.status == TaskResultStatus.FAILED
    assert result.errors[0].exception_class_path == "tickq.errors.JobTimeout"


def test_postgres_settings_become_a_tickq_url() -> None:
    from tickq.contrib.django.database import _postgres_url

    options = {"options": "-c search_path=s1", "sslmode": "require"}
    settings = {"NAME": "app db", "USER": "me", "PASSWORD": "p@ss/word", "HOST": "db",
                "PORT": 6543, "OPTIONS": options}  # fmt: skip
    assert _postgres_url(settings) == (
        "postgresql://me:p%40ss%2Fword@db:6543/app%20db"
        "?options=-c%20search_path%3Ds1&sslmode=require"
    )
    assert _postgres_url({"NAME": "x"}) == "postgresql:///x"


def test_a_cancelled_job_reads_as_failed_without_errors() -> None:
    result = send_welcome_email.enqueue("n@example.com")
    queue().cancel(int(result.id))
    result.refresh()
    assert result.status == TaskResultStatus.FAILED and result.errors == []


def test_bad_schedules_are_refused_at_decoration() -> None:
    from tickq import ConfigurationError
    from tickq.contrib.django import schedule

    with pytest.raises(ConfigurationError, match=r"cron 'every day' has 2 field"):
        schedule("every day")(tasks.low)
    with pytest.raises(ConfigurationError, match="called with no arguments"):
        schedule("@daily")(tasks.low)


def test_get_result_of_an_unknown_id() -> None:
    for bad in ("999999", "abc", "", "1" * 30):
        with pytest.raises(TaskResultDoesNotExist):
            send_welcome_email.get_result(bad)


def test_the_cron_schedule_runs_through_the_tick_url(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CRON_SECRET", SECRET)
    Booking.objects.create(email="g@example.com", starts_at=timezone.now() + timedelta(hours=3))
    Booking.objects.create(email="h@example.com", starts_at=timezone.now() + timedelta(days=3))
    client = Client(enforce_csrf_checks=True)
    assert client.post("/api/cron/tick").status_code == 401
    assert client.post("/api/cron/tick", headers={"authorization": "Bearer wrong-token-xxxxxxxxx"}
                       ).status_code == 401  # fmt: skip
    answer = client.post("/api/cron/tick", headers={"authorization": f"Bearer {SECRET}"})
    assert answer.status_code == 200, answer.content
    report = answer.json()
    names = [s["name"] for s in report["schedules_enqueued"]]
    assert names == [send_booking_reminders.module_path]
    assert report["jobs"]["succeeded"] == 1
    assert list(SentEmail.objects.values_list("key", flat=True)) == [
        f"reminder:{Booking.objects.get(email='g@example.com').pk}"
    ]
    job_id = report["schedules_enqueued"][0]["job_id"]
    assert send_booking_reminders.get_result(str(job_id)).return_value == 1
    again = client.post("/api/cron/tick", headers={"authorization": f"Bearer {SECRET}"})
    assert again.json()["schedules_enqueued"] == []  # the same slot never runs twice


def test_the_health_url_needs_no_token(monkeypatch: pytest.MonkeyPatch) -> None:
    """As on every adapter: an uptime monitor polls it without the tick's secret."""
    monkeypatch.setenv("CRON_SECRET", SECRET)
    client = Client(enforce_csrf_checks=True)
    assert client.get("/api/cron/health").status_code == 503  # no tick ran yet
    assert client.post("/api/cron/tick").status_code == 401  # the tick still needs it
    assert client.post("/api/cron/tick", headers={"authorization": f"Bearer {SECRET}"}
                       ).status_code == 200  # fmt: skip
    answer = client.get("/api/cron/health")
    assert answer.status_code == 200 and answer.json()["ok"] is True
    assert client.head("/api/cron/health").status_code == 200


def test_the_result_enqueue_returns_is_the_one_read_back() -> None:
    with transaction.atomic():
        inside = send_welcome_email.enqueue("k@example.com")
    outside = send_welcome_email.enqueue("l@example.com")
    backend = task_backends["default"]
    for result in (inside, outside):
        stored = backend.get_result(result.id)
        assert result.enqueued_at == stored.enqueued_at
        assert result == stored
        enqueued_at = result.enqueued_at
        result.refresh()
        assert result.enqueued_at == enqueued_at


def test_a_failure_reaches_djangos_log_with_its_exception(
    caplog: pytest.LogCaptureFixture,
) -> None:
    result = tasks.always_fails.enqueue(5)
    with caplog.at_level("INFO"):
        burst()
    ours = [r for r in caplog.records if f"id={result.id} " in r.getMessage()
            and "FAILED" in r.getMessage()]  # fmt: skip
    assert [r.levelname for r in ours] == ["ERROR"], [r.getMessage() for r in caplog.records]
    assert ours[0].exc_info is not None and ours[0].exc_info[0] is tasks.PaymentDeclined
    assert "card declined for 5" in caplog.text


def test_a_failure_is_logged_with_the_exception_it_failed_with_only(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """An async task cancelled by its timeout saw a CancelledError, but failed with
    JobTimeout: Django's log line is not given the CancelledError."""
    result = tasks.too_slow_async.enqueue()
    with caplog.at_level("INFO"):
        burst()
    assert tasks.too_slow_async.get_result(result.id).errors[-1].exception_class_path == (
        "tickq.errors.JobTimeout")  # fmt: skip
    ours = [r for r in caplog.records if f"id={result.id} " in r.getMessage()
            and "FAILED" in r.getMessage()]  # fmt: skip
    assert len(ours) == 1, [r.getMessage() for r in caplog.records]
    assert ours[0].exc_info is None or ours[0].exc_info[0] is not asyncio.CancelledError, (
        ours[0].exc_info)  # fmt: skip


def test_an_exception_kept_for_task_finished_keeps_no_local_variables() -> None:
    """An attempt whose end this process never records (its lease lost, say) leaves its
    exception kept here: the frames it ran in are cleared, so a task's big locals go."""
    import gc

    result = tasks.holds_then_fails.enqueue()
    q = queue()
    job = q.get_job(int(result.id))
    definition = q._runtime.definition(job.type)
    with pytest.raises(tasks.PaymentDeclined) as raised:
        definition.fn(ctx=JobContext.of(job), args=[], kwargs={})
    del raised  # the test's own reference to the exception
    gc.collect()
    assert tasks.HELD and tasks.HELD[-1]() is None, "the task's local is still referenced"


def test_a_task_raising_system_exit_or_keyboard_interrupt_just_fails() -> None:
    exits = tasks.exits.enqueue(3)
    interrupts = tasks.interrupts.enqueue()
    ok = send_welcome_email.enqueue("m@example.com")
    report = burst()  # the process (this test's) carries on
    assert "failed=2" in report
    assert [e.exception_class_path for e in tasks.exits.get_result(exits.id).errors] == [
        "builtins.SystemExit"
    ]  # fmt: skip
    errors = tasks.interrupts.get_result(interrupts.id).errors
    assert [e.exception_class for e in errors] == [KeyboardInterrupt]
    assert send_welcome_email.get_result(ok.id).status == TaskResultStatus.SUCCESSFUL


def test_an_unknown_job_type_error_names_tickqs_class() -> None:
    from tickq import Queue
    from tickq.errors import UnknownJobType

    result = send_welcome_email.enqueue("u@example.com")
    other = Queue(queue().url)  # a process that doesn't know the task
    try:
        assert other.process_jobs(queues=["emails"])["retried"] == 1
    finally:
        other.close()
    errors = send_welcome_email.get_result(result.id).errors
    assert [e.exception_class_path for e in errors] == ["tickq.errors.UnknownJobType"]
    assert errors[0].exception_class is UnknownJobType


def test_the_commands_refuse_an_unknown_backend_with_a_command_error() -> None:
    from django.core.management.base import CommandError

    refused = r"--backend unknown: there is no TASKS\['unknown'\].*\(configured: 'default'\)"
    with pytest.raises(CommandError, match=refused):
        call_command("tickq_worker", "--backend", "unknown", "--burst")
    with pytest.raises(CommandError, match=refused):
        call_command("tickq_tick", "--backend", "unknown")


def test_the_checks_report_a_missing_app() -> None:
    from django.conf import settings
    from django.test import override_settings

    backend = task_backends["default"]
    assert backend.check() == []
    apps = [a for a in settings.INSTALLED_APPS if a != "tickq.contrib.django"]
    with override_settings(INSTALLED_APPS=apps):
        found = backend.check()
    assert [m.id for m in found] == ["tickq.E001"]
    assert "'tickq.contrib.django' is not in INSTALLED_APPS" in found[0].msg


def test_the_tick_command_prints_its_report() -> None:
    send_welcome_email.enqueue("i@example.com")
    out = io.StringIO()
    call_command("tickq_tick", "--limit", "5", stdout=out)
    report = json.loads(out.getvalue())
    assert report["jobs"]["succeeded"] >= 1  # the welcome email, and the reminder slot


def test_signup_view_enqueues_in_the_same_transaction() -> None:
    answer = Client().post("/signup", {"email": "j@example.com"}, content_type="application/json")
    assert answer.status_code == 201
    job = queue().get_job(int(answer.json()["job"]))
    assert job is not None and job.type == send_welcome_email.module_path


def test_conn_takes_djangos_connection_and_its_proxy() -> None:
    from django.db import connection, connections

    from tickq import Queue

    q = Queue(queue().url, strict=False)
    with transaction.atomic():
        ids = [q.enqueue("plain", conn=connection), q.enqueue("plain", conn=connections["default"])]
        transaction.set_rollback(True)
    assert [q.get_job(i) for i in ids] == [None, None]
    kept = q.enqueue("plain", conn=connection)
    assert q.get_job(kept) is not None
    q.close()


def test_settings_name_the_database() -> None:
    assert os.environ.get("BOOKINGS_DATABASE_URL", "").split(":")[0] in ("sqlite", "postgresql")


@pytest.mark.parametrize("max_age", [0, 600, None, 0.2])
def test_tickqs_connection_outlives_a_request_as_conn_max_age_says(max_age) -> None:
    """As Django's own: closed after each request with CONN_MAX_AGE 0, kept for N seconds,
    kept for good with None (this thread's connection; Django's test client runs the
    request here)."""
    store, client = queue()._store, Client()
    database = settings.DATABASES["default"]
    before = database.get("CONN_MAX_AGE", 0)
    database["CONN_MAX_AGE"] = max_age
    try:
        assert client.get("/api/cron/health").status_code in (200, 503)  # read: no tick yet
        first = store._connection()
        assert client.get("/api/cron/health").status_code in (200, 503)  # read: no tick yet
        assert (store._connection() is first) == (max_age != 0)
        if max_age == 0.2:
            time.sleep(0.25)  # older than CONN_MAX_AGE now: the next request's end closes it
            assert client.get("/api/cron/health").status_code in (200, 503)  # read: no tick yet
            assert store._connection() is not first
    finally:
        database["CONN_MAX_AGE"] = before
