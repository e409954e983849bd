"""The first failure after a quiet window is alerted within ``group_wait``; the rest of the
window's failures make one follow-up when it closes. Injected clock, a real HTTP receiver,
in ``process_jobs``, in a real worker loop and in a tick."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest

from receivers import HttpReceiver, http_receiver
from tickq import ConfigurationError, FrozenClock, JobState, Queue
from tickq.alerts import Alerts, Webhook
from workerproc import eventually

WINDOW = timedelta(minutes=10)
START = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)  # a window's start
GRACE = timedelta(seconds=10)  # the window's alert runs this long after it closes

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(autouse=True)
def _no_alert_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("TICKQ_ALERT_WEBHOOK_URL", "TICKQ_ALERT_EMAIL_TO", "TICKQ_SMTP_URL"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def http() -> Iterator[HttpReceiver]:
    with http_receiver() as receiver:
        yield receiver


@pytest.fixture
def q(db_url: str, clock: FrozenClock, http: HttpReceiver) -> Iterator[Queue]:
    clock.set(START + timedelta(minutes=1))
    queue = Queue(db_url, clock=clock, alerts=Alerts([Webhook(http.url)], window=WINDOW))
    queue.migrate()
    queue.job(name="charge", max_attempts=1)(_always_fails)
    queue.job(name="resize", max_attempts=1)(_always_fails)
    yield queue
    queue.close()


def _always_fails(n: int) -> None:
    raise ConnectionError(f"provider down ({n})")


def failed_jobs(http: HttpReceiver) -> list[tuple[str, int]]:
    """(job type, failed jobs) of each alert received, in order."""
    return [(r.json()["job_type"], r.json()["failed_jobs"]) for r in http.requests]


def fail(q: Queue, job_type: str = "charge", count: int = 1) -> None:
    q.enqueue_many([(job_type, {"n": n}) for n in range(count)])
    assert q.process_jobs(queues=["default"])["failed"] == count


def test_first_failure_alerts_within_group_wait_and_the_rest_make_one_follow_up(
    q: Queue, clock: FrozenClock, http: HttpReceiver
) -> None:
    fail(q)
    clock.advance(seconds=29)
    q.process_jobs()
    assert http.requests == []  # group_wait gathers a burst first
    clock.advance(seconds=1)
    q.process_jobs()
    assert failed_jobs(http) == [("charge", 1)]

    for _ in range(3):  # a storm in the same window: nothing more until it closes
        clock.advance(minutes=1)
        fail(q, count=5)
        q.process_jobs()
    fail(q, "resize")  # another type has a first alert of its own
    clock.advance(seconds=30)
    q.process_jobs()
    assert failed_jobs(http) == [("charge", 1), ("resize", 1)]

    clock.set(START + WINDOW + GRACE)
    q.process_jobs()
    assert failed_jobs(http)[2:] == [("charge", 15)]  # the follow-up: what came after
    assert "tickq retry APP --failed --type charge" in http.requests[2].json()["text"]
    assert len(http.requests) == 3  # resize: nothing after its first alert, no follow-up


def test_a_storm_going_on_into_the_next_window_alerts_when_that_window_closes(
    q: Queue, clock: FrozenClock, http: HttpReceiver
) -> None:
    fail(q)
    clock.set(START + WINDOW + timedelta(minutes=1))  # the first alert and follow-up ran
    q.process_jobs()
    assert failed_jobs(http) == [("charge", 1)]
    fail(q, count=2)  # the window before had failures: not quiet, no first alert
    clock.advance(minutes=2)
    q.process_jobs()
    assert len(http.requests) == 1
    clock.set(START + 2 * WINDOW + GRACE)
    q.process_jobs()
    assert failed_jobs(http) == [("charge", 1), ("charge", 2)]

    clock.set(START + 4 * WINDOW + timedelta(minutes=3))  # a quiet window went by
    fail(q)
    clock.advance(seconds=30)
    q.process_jobs()
    assert failed_jobs(http)[2:] == [("charge", 1)]


def test_a_tick_that_records_a_failure_delivers_the_first_alert_before_returning(
    q: Queue, clock: FrozenClock, http: HttpReceiver
) -> None:
    q.enqueue_many([("charge", {"n": n}) for n in range(3)])
    summary = q.tick()
    assert summary["jobs"]["failed"] == 3
    # Delivered before the tick returned (nothing else runs on a sleeping host), and
    # counting every failure the tick recorded, not just the first.
    assert failed_jobs(http) == [("charge", 3)]

    clock.advance(minutes=2)
    q.enqueue_many([("charge", {"n": n}) for n in range(4)])
    assert q.tick()["jobs"]["failed"] == 4
    assert len(http.requests) == 1  # grouped into the window's follow-up
    clock.set(START + WINDOW + GRACE)
    q.tick()
    assert failed_jobs(http) == [("charge", 3), ("charge", 4)]


def test_a_worker_sends_the_first_alert_after_group_wait_and_groups_the_rest(
    q: Queue, clock: FrozenClock, http: HttpReceiver
) -> None:
    stop = threading.Event()
    worker = threading.Thread(
        target=q.run_worker, kwargs={"stop": stop, "poll_interval": 0.05}, daemon=True
    )
    worker.start()
    try:
        first = q.enqueue("charge", {"n": 1})
        eventually(lambda: _status(q, first) == JobState.FAILED, 20, "the job to fail")
        assert http.requests == []
        clock.advance(seconds=30)
        eventually(lambda: len(http.requests) == 1, 20, "the first alert")
        ids = [q.enqueue("charge", {"n": n}) for n in range(3)]
        eventually(lambda: all(_status(q, i) == JobState.FAILED for i in ids), 20, "failures")
        clock.set(START + WINDOW + GRACE)
        eventually(lambda: len(http.requests) == 2, 20, "the follow-up")
    finally:
        stop.set()
        worker.join(20)
    assert not worker.is_alive()
    assert failed_jobs(http) == [("charge", 1), ("charge", 3)]


def _status(q: Queue, job_id: int) -> JobState | None:
    job = q.get_job(job_id)
    return job.status if job else None


def test_group_wait_zero_alerts_at_once_and_is_checked(db_url: str, clock: FrozenClock) -> None:
    got: list[object] = []
    q = Queue(db_url, clock=clock, alerts=Alerts([got.append], group_wait=timedelta(0)))
    try:
        q.migrate()
        q.job(name="charge", max_attempts=1)(_always_fails)
        q.enqueue("charge", {"n": 1})
        q.process_jobs()
        q.process_jobs()
        assert len(got) == 1
    finally:
        q.close()
    with pytest.raises(ConfigurationError, match="group_wait must be a timedelta >= 0"):
        Alerts(group_wait=timedelta(seconds=-1))
    with pytest.raises(ConfigurationError, match="got 30"):
        Alerts(group_wait=30)  # type: ignore[arg-type]


def test_a_tick_without_alerts_configured_does_not_import_them(tmp_path: object) -> None:
    import subprocess
    import sys

    from conftest import tickq_env

    code = (
        "import sys; import tickq; q = tickq.Queue('sqlite:///" + f"{tmp_path}/cold.db'); "
        "q.migrate(); q.tick(); print('tickq.alerts' in sys.modules)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], env=tickq_env(), capture_output=True, text=True, timeout=60
    )
    assert done.stdout.strip() == "False", done.stderr


def test_the_follow_up_finds_its_first_alert_among_many(
    q: Queue, clock: FrozenClock, http: HttpReceiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tickq.alerts import rules

    monkeypatch.setattr(rules, "PAGE", 1)  # one alert job per page: the look-up pages back
    fail(q, "charge")
    fail(q, "resize")
    clock.advance(seconds=30)
    q.process_jobs()
    fail(q, "charge", count=2)
    clock.set(START + WINDOW + GRACE)
    q.process_jobs()
    assert sorted(failed_jobs(http)) == [("charge", 1), ("charge", 2), ("resize", 1)]


def test_an_idle_worker_wakes_for_the_first_alert_however_long_its_poll(
    db_url: str, http: HttpReceiver, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="tickq")
    # The real clock: the alert job comes due 1 s after the failure, and no NOTIFY is sent
    # for it; only the worker knowing to look then beats its 600 s poll (the timeout).
    q = Queue(db_url, alerts=Alerts([Webhook(http.url)], group_wait=timedelta(seconds=1)))
    q.migrate()
    q.job(name="charge", max_attempts=1)(_always_fails)
    q.job(name="ok")(lambda: None)
    stop = threading.Event()
    worker = threading.Thread(
        target=q.run_worker, kwargs={"stop": stop, "poll_interval": 600}, daemon=True
    )
    worker.start()
    try:
        first = q.enqueue("ok", {})
        eventually(lambda: _status(q, first) == JobState.DONE, 20, "a first job")
        heard = "listening for enqueues"
        eventually(lambda: any(heard in r.getMessage() for r in caplog.records), 20, heard)
        time.sleep(0.3)  # idle now: the next look is 600 s away unless something wakes it
        q.enqueue("charge", {"n": 1})
        eventually(lambda: len(http.requests) == 1, 30, "the first alert")
    finally:
        stop.set()
        worker.join(20)
        q.close()
    assert not worker.is_alive()
