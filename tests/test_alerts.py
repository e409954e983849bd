"""Alerts reach a real SMTP server and a real HTTP receiver: once per type and window,
durably (as jobs), and without ever stopping the work."""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from receivers import free_port, http_receiver, self_signed_tls, smtp_server
from tickq import ConfigurationError, FrozenClock, JobState, Queue
from tickq.alerts import Alert, Alerts, DeliveryError, Email, Webhook, sinks_from_env
from tickq.alerts.rules import COMPOSE_TYPE, DELIVER_TYPE, window_start

BACKOFF_WAITS = (0, 60, 300, 1800)  # the default backoff between the 4 attempts
AFTER_WINDOW = timedelta(minutes=15)  # default window (10 min) + grace, whatever the start


@pytest.fixture(autouse=True)
def _no_alert_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("TICKQ_ALERT_WEBHOOK_URL", "TICKQ_ALERT_WEBHOOK_FORMAT", "TICKQ_ALERT_EMAIL_TO",
                 "TICKQ_SMTP_URL", "TICKQ_ALERT_EMAIL_FROM"):  # fmt: skip
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def queues(db_url: str, clock: FrozenClock) -> Iterator[list[Queue]]:
    made: list[Queue] = []
    yield made
    for q in made:
        q.close()


def make_queue(made: list[Queue], db_url: str, clock: FrozenClock, alerts: object) -> Queue:
    q = Queue(db_url, clock=clock, alerts=alerts)  # type: ignore[arg-type]
    q.migrate()
    made.append(q)
    return q


def jobs_of(q: Queue, job_type: str) -> list:
    return q.list_jobs(type=job_type, limit=1000)


def test_a_job_that_always_raises_fails_after_4_attempts_and_alerts_once(
    queues: list[Queue], db_url: str, clock: FrozenClock
) -> None:
    with http_receiver() as http, smtp_server() as smtp:
        q = make_queue(queues, db_url, clock, [
            Webhook(http.url, format="json"),
            Email(host="127.0.0.1", port=smtp.port, sender="jobs@example.com",
                  to=["ops@example.com"], starttls=False),
        ])  # fmt: skip

        @q.job(max_attempts=4)
        def charge_card(order_id: int) -> None:
            raise RuntimeError(f"payment provider down for order {order_id}")

        job_id = charge_card.enqueue(order_id=7)
        for wait in BACKOFF_WAITS:
            clock.advance(seconds=wait)
            q.process_jobs()

        job = q.get_job(job_id)
        assert job is not None and job.status == JobState.FAILED and job.attempts == 4
        attempts = q.attempts(job_id)
        assert [a.attempt for a in attempts] == [1, 2, 3, 4]
        for a in attempts:
            assert a.outcome == "error"
            assert a.error_type == "RuntimeError"
            assert a.error_message == "payment provider down for order 7"
            assert a.traceback and "in charge_card" in a.traceback
            assert a.started_at is not None and a.finished_at is not None
        assert (http.requests, smtp.messages) == ([], [])  # grouped: sent when the window closes

        clock.advance(AFTER_WINDOW)
        q.process_jobs()
        clock.advance(hours=3)
        q.process_jobs()

        assert len(http.requests) == 1
        body = http.requests[0].json()
        assert body["kind"] == "failed" and body["job_type"] == "charge_card"
        assert body["failed_jobs"] == 1 and body["job_ids"] == [job_id]
        assert "payment provider down for order 7" in body["last_error"]
        assert http.requests[0].headers["Content-Type"] == "application/json"
        assert len(smtp.messages) == 1
        mail = smtp.messages[0]
        assert mail["Subject"] == "tickq: 1 job of type 'charge_card' failed"
        assert smtp.envelopes == [("jobs@example.com", ["ops@example.com"])]
        text = mail.get_payload()
        assert "RuntimeError: payment provider down for order 7" in text
        assert "tickq retry APP --failed --type charge_card" in text


def test_fifty_failures_in_one_window_make_one_alert_that_says_fifty(
    queues: list[Queue], db_url: str, clock: FrozenClock
) -> None:
    with http_receiver() as http:
        # Two Queues (as two processes would) share nothing but the database.
        workers = [make_queue(queues, db_url, clock, [Webhook(http.url)]) for _ in range(2)]
        for q in workers:
            q.job(name="sync_contact", max_attempts=1)(_always_fails)
        workers[0].enqueue_many([("sync_contact", {"n": n}) for n in range(50)])
        assert workers[0].process_jobs(limit=25)["failed"] == 25
        assert workers[1].process_jobs(limit=25)["failed"] == 25

        # Two alert jobs in all, not one per failure or per process: the first alert and
        # the window's follow-up (which finds nothing left to say).
        assert len(jobs_of(workers[0], COMPOSE_TYPE)) == 2
        clock.advance(AFTER_WINDOW)
        workers[1].process_jobs()
        workers[0].process_jobs()

        assert len(http.requests) == 1
        alert = http.requests[0].json()
        assert alert["failed_jobs"] == 50 and alert["failed_attempts"] == 50
        assert alert["title"] == "tickq: 50 jobs of type 'sync_contact' failed"
        assert alert["text"].startswith("50 jobs of type 'sync_contact' ran out of attempts")
        assert len(alert["job_ids"]) == 10


def _always_fails(n: int) -> None:
    raise ConnectionError(f"CRM unreachable ({n})")


def test_on_the_real_clock_the_alert_comes_once_the_window_closes(queue: Queue) -> None:
    got: list[Alert] = []
    q = Queue(queue.url, alerts=Alerts([got.append], window=timedelta(seconds=1)))
    try:
        q.job(name="notify", max_attempts=1)(_always_fails)
        q.enqueue_many([("notify", {"n": n}) for n in range(3)])
        q.process_jobs()
        deadline = time.monotonic() + 30
        while sum(a.failed_jobs for a in got) < 3 and time.monotonic() < deadline:
            q.process_jobs()
            time.sleep(0.05)
        # One alert, or two if the failures straddled a window's edge: all 3 counted once.
        assert sum(a.failed_jobs for a in got) == 3 and len(got) in (1, 2)
    finally:
        q.close()


def test_repeated_failed_attempts_alert_before_any_job_runs_out(
    queues: list[Queue], db_url: str, clock: FrozenClock
) -> None:
    got: list[Alert] = []
    q = make_queue(queues, db_url, clock, Alerts([got.append], repeated_failures=5))
    q.job(name="flaky", max_attempts=3)(_always_fails)
    q.job(name="rarely_flaky", max_attempts=3)(_always_fails)
    q.enqueue_many([("flaky", {"n": n}) for n in range(6)])
    q.enqueue_many([("rarely_flaky", {"n": n}) for n in range(2)])
    assert q.process_jobs()["retried"] == 8

    clock.set(window_start(clock.now(), timedelta(minutes=10)) + AFTER_WINDOW)
    q.process_jobs(queues=["tickq.alerts"])  # only the alerts: no further attempts

    assert len(got) == 1  # rarely_flaky (2 failed attempts) stays under the threshold
    assert got[0].kind == "repeated_failures" and got[0].job_type == "flaky"
    assert got[0].failed_attempts == 6 and got[0].failed_jobs == 0
    assert "(alert threshold: 5)" in got[0].text


def test_a_webhook_on_a_closed_port_neither_stops_the_work_nor_is_dropped(
    queues: list[Queue], db_url: str, clock: FrozenClock, caplog: pytest.LogCaptureFixture
) -> None:
    sink = Webhook(f"http://127.0.0.1:{free_port()}/hook", timeout=2)
    q = make_queue(queues, db_url, clock, [sink])
    q.job(name="import_feed", max_attempts=1)(_always_fails)
    done: list[int] = []

    @q.job()
    def send_receipt(n: int) -> None:
        done.append(n)

    q.enqueue("import_feed", {"n": 1})
    q.process_jobs()
    clock.advance(AFTER_WINDOW)
    q.enqueue_many([("send_receipt", {"n": n}) for n in range(3)])
    report = q.process_jobs()

    assert done == [0, 1, 2]  # the work went on
    # first alert + its follow-up (nothing to add) + 3 receipts; the delivery is retried
    assert report["succeeded"] == 5 and report["retried"] == 1
    [delivery] = jobs_of(q, DELIVER_TYPE)
    assert delivery.status == JobState.PENDING and delivery.attempts == 1
    assert f"{sink.name} could not be reached" in (delivery.last_error or "")
    assert "/hook" not in (delivery.last_error or "")  # the URL's path may be a secret

    with caplog.at_level(logging.ERROR, logger="tickq"):
        for _ in range(8):
            clock.advance(hours=1)
            q.process_jobs()
    delivery = q.get_job(delivery.id)
    assert delivery is not None and delivery.status == JobState.FAILED
    assert [a.outcome for a in q.attempts(delivery.id)] == ["error"] * 8
    assert any(f"alert sink {sink.name} kept failing" in r.getMessage() for r in caplog.records)
    assert len(jobs_of(q, COMPOSE_TYPE)) == 2  # a failing alert does not alert about itself


def test_each_sink_retries_on_its_own(queues: list[Queue], db_url: str, clock: FrozenClock) -> None:
    got: list[Alert] = []

    def broken_pager(alert: Alert) -> None:
        raise OSError("pager service down")

    q = make_queue(queues, db_url, clock, [broken_pager, got.append])
    q.job(name="resize_image", max_attempts=1)(_always_fails)
    q.enqueue("resize_image", {"n": 1})
    q.process_jobs()
    clock.advance(AFTER_WINDOW)
    q.process_jobs()
    clock.advance(minutes=1)
    q.process_jobs()

    assert [a.job_type for a in got] == ["resize_image"]
    statuses = sorted((j.payload["sink"].rsplit(".", 1)[-1], j.status.value, j.attempts)
                      for j in jobs_of(q, DELIVER_TYPE))  # fmt: skip
    assert statuses == [("append", "done", 1), ("broken_pager", "pending", 2)]


def test_tick_overdue_is_one_alert_per_window_however_often_it_is_raised(
    queues: list[Queue], db_url: str, clock: FrozenClock
) -> None:
    with http_receiver() as http:
        q = make_queue(queues, db_url, clock, [Webhook(http.url, format="slack")])
        last_tick = clock.now() - timedelta(minutes=47)
        ids = {q.alerts.tick_overdue(last_tick, timedelta(minutes=15)) for _ in range(5)}
        assert len(ids - {None}) == 1
        report = q.alerts.deliver()
        assert report is not None and report["succeeded"] == 2  # compose + delivery

        assert len(http.requests) == 1
        text = http.requests[0].json()["text"]
        assert text.startswith("*tickq: the tick is overdue*\n")
        assert "47 minutes ago; one is expected every 15 minutes" in text


@pytest.mark.parametrize("minute", [0, 10, 45])
def test_a_stale_tick_seen_by_the_health_check_alerts_once_an_hour(
    queues: list[Queue], db_url: str, clock: FrozenClock, minute: int
) -> None:
    # The polls below cross the top of the hour when the first tick is at :10: still one
    # alert (periods are counted from when the tick became overdue, not by clock hours).
    clock.set(datetime(2026, 3, 2, 9, minute, tzinfo=UTC))
    with http_receiver() as http:
        q = make_queue(queues, db_url, clock, [Webhook(http.url)])
        q.tick()
        clock.advance(minutes=20)
        assert q.health(timedelta(minutes=15))["ok"] and http.requests == []
        clock.advance(minutes=27)
        for _ in range(5):  # an uptime monitor polling the health endpoint
            assert q.health(timedelta(minutes=15))["status"] == "stale"
            clock.advance(minutes=1)
        assert len(http.requests) == 1
        alert = http.requests[0].json()
        assert alert["kind"] == "tick_overdue" and "47 minutes ago" in alert["text"]

        clock.advance(hours=1)
        q.health(timedelta(minutes=15))
        assert len(http.requests) == 2


def test_with_only_the_log_sink_failures_are_logged_and_no_alert_jobs_exist(
    queues: list[Queue], db_url: str, clock: FrozenClock, caplog: pytest.LogCaptureFixture
) -> None:
    q = make_queue(queues, db_url, clock, None)
    q.job(name="nightly_report", max_attempts=1)(_always_fails)
    q.enqueue("nightly_report", {"n": 3})
    with caplog.at_level(logging.ERROR, logger="tickq"):
        q.process_jobs()
        assert q.alerts.tick_overdue(None, timedelta(minutes=15)) is None
    assert not q.alerts.enabled and COMPOSE_TYPE not in q.job_names()
    messages = [r.getMessage() for r in caplog.records]
    assert any("nightly_report failed after 1 attempt(s): ConnectionError" in m for m in messages)
    assert any("No tick has ever run" in m for m in messages)
    assert q.stats()["by_status"]["pending"] == 0


@pytest.mark.filterwarnings("ignore:Requiring AUTH while not requiring TLS")
def test_env_configures_webhook_and_email_with_login(
    queues: list[Queue], db_url: str, clock: FrozenClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    with http_receiver() as http, smtp_server(login=("mailer", "p@ss word")) as smtp:
        monkeypatch.setenv("TICKQ_ALERT_WEBHOOK_URL", http.url)
        monkeypatch.setenv("TICKQ_ALERT_EMAIL_TO", "ops@example.com, cto@example.com")
        monkeypatch.setenv(
            "TICKQ_SMTP_URL", f"smtp://mailer:p%40ss%20word@127.0.0.1:{smtp.port}?starttls=0"
        )
        monkeypatch.setenv("TICKQ_ALERT_EMAIL_FROM", "tickq@example.com")
        q = make_queue(queues, db_url, clock, None)
        q.job(name="webhook_out", max_attempts=1)(_always_fails)
        q.enqueue("webhook_out", {"n": 1})
        q.process_jobs()
        clock.advance(AFTER_WINDOW)
        q.process_jobs()

        assert len(http.requests) == 1 and http.requests[0].json()["job_type"] == "webhook_out"
        assert smtp.logins == ["mailer"]
        assert smtp.envelopes == [("tickq@example.com", ["ops@example.com", "cto@example.com"])]


def test_email_upgrades_with_starttls_verifies_the_server_and_logs_in(
    queues: list[Queue], db_url: str, clock: FrozenClock, tmp_path: Path
) -> None:
    server_tls, client_tls = self_signed_tls(tmp_path)
    with smtp_server(login=("mailer", "secret"), tls=server_tls) as smtp:
        trusting = Email("localhost", smtp.port, "jobs@example.com", "ops@example.com",
                         "mailer", "secret", ssl_context=client_tls)  # fmt: skip
        got: list[Alert] = []
        q = make_queue(queues, db_url, clock, [trusting, got.append])
        q.job(name="send_invoice", max_attempts=1)(_always_fails)
        q.enqueue("send_invoice", {"n": 1})
        q.process_jobs()
        clock.advance(AFTER_WINDOW)
        q.process_jobs()
        assert smtp.logins == ["mailer"] and len(smtp.messages) == 1

        # The default context checks the certificate: a self-signed one is refused.
        strict = Email("localhost", smtp.port, "jobs@example.com", "ops@example.com",
                       "mailer", "secret")  # fmt: skip
        with pytest.raises(DeliveryError, match="CERTIFICATE_VERIFY_FAILED"):
            strict(got[0])
        assert len(smtp.messages) == 1


def test_the_same_sink_in_code_and_env_delivers_once(
    queues: list[Queue], db_url: str, clock: FrozenClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TICKQ_ALERT_WEBHOOK_URL", "https://hooks.slack.com/services/T0/B0/x")
    q = make_queue(queues, db_url, clock, [Webhook("https://hooks.slack.com/services/T0/B0/x")])
    assert len(q.alerts.sinks) == 1
    [env_sink] = sinks_from_env()
    assert isinstance(env_sink, Webhook) and env_sink.format == "slack"  # from the host


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"TICKQ_ALERT_EMAIL_TO": "ops@example.com"}, "TICKQ_ALERT_EMAIL_TO is set but "
         "TICKQ_SMTP_URL is not"),
        ({"TICKQ_ALERT_EMAIL_TO": "ops@example.com", "TICKQ_SMTP_URL": "http://mail:25"},
         "SMTP URL must look like smtp://"),
        ({"TICKQ_ALERT_EMAIL_TO": "ops", "TICKQ_SMTP_URL": "smtp://mail"},
         "at least one recipient address"),
        ({"TICKQ_ALERT_WEBHOOK_URL": "hooks.example/x"}, "webhook URL must be http(s)://"),
        ({"TICKQ_ALERT_WEBHOOK_URL": "https://h.example/x", "TICKQ_ALERT_WEBHOOK_FORMAT": "xml"},
         "TICKQ_ALERT_WEBHOOK_FORMAT must be 'json' or 'slack', got 'xml'"),
        ({"TICKQ_ALERT_EMAIL_TO": "a@b.c", "TICKQ_SMTP_URL": "smtp://u:secret@m?starttls=maybe"},
         "starttls must be 1 or 0, got 'maybe'"),
    ],
)  # fmt: skip
def test_bad_alert_settings_fail_at_start_with_one_clear_line(
    env: dict[str, str], message: str
) -> None:
    with pytest.raises(ConfigurationError, match=re.escape(message)) as info:
        sinks_from_env(env)
    assert "\n" not in str(info.value) and "secret" not in str(info.value)


def test_bad_alert_arguments_are_refused(db_url: str) -> None:
    with pytest.raises(ConfigurationError, match=r"alert sink 'ops@example\.com' is not callable"):
        Queue(db_url, alerts=["ops@example.com"])  # type: ignore[list-item]
    with pytest.raises(ConfigurationError, match="alerts must be a list of sinks"):
        Queue(db_url, alerts="https://hooks.example/x")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="webhook format must be 'json' or 'slack'"):
        Webhook("https://hooks.example/x", format="xml")
    with pytest.raises(ConfigurationError, match="repeated_failures must be >= 1, got 0"):
        Alerts([print], repeated_failures=0)
    with pytest.raises(ConfigurationError, match="alert window must be a timedelta"):
        Alerts([print], window=60)  # type: ignore[arg-type]


def test_window_start_is_aligned_to_the_clock() -> None:
    clock = FrozenClock()
    clock.set(clock.now().replace(hour=10, minute=17, second=42, microsecond=5))
    start = window_start(clock.now(), timedelta(minutes=10))
    assert (start.hour, start.minute, start.second, start.microsecond) == (10, 10, 0, 0)
