"""Sentry: ``TickqIntegration`` with the real ``sentry-sdk`` and a transport, in this
process, that keeps every envelope the SDK would send."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import sentry_sdk
from sentry_sdk.integrations.logging import LoggingIntegration
from sentry_sdk.transport import Transport

from tickq import Queue, observe
from tickq.contrib.sentry import REPORTED, SentryWatcher, TickqIntegration


class Kept(Transport):
    """Keeps the envelopes instead of sending them."""

    envelopes: list[Any] = []

    def capture_envelope(self, envelope: Any) -> None:
        Kept.envelopes.append(envelope)


def items(kind: str) -> list[dict[str, Any]]:
    sentry_sdk.flush()
    return [i.payload.json for e in Kept.envelopes for i in e.items if i.type == kind]


Init = Callable[..., None]


@pytest.fixture
def sentry() -> Iterator[Init]:
    def init(**options: Any) -> None:
        Kept.envelopes = []
        sentry_sdk.init(
            dsn="https://key@sentry.invalid/1", transport=Kept, default_integrations=False,
            integrations=[TickqIntegration(**options.pop("tickq", {})),
                          LoggingIntegration(level=logging.INFO, event_level=logging.ERROR)],
            **options,
        )  # fmt: skip
        observe.watch(SentryWatcher())  # setup_once ran for this process's first init only
        REPORTED.clear()  # job ids repeat from one test's database to the next

    try:
        yield init
    finally:
        sentry_sdk.get_client().close()
        sentry_sdk.init(default_integrations=False)  # no DSN, no integration: inert
        observe.unwatch(SentryWatcher)


def failing_queue(db_url: str) -> Queue:
    q = Queue(db_url)
    q.migrate()

    @q.job(max_attempts=2, backoff=lambda attempt: 0, queue="mail")
    def send_welcome(email: str, plan: str) -> None:
        logging.getLogger("mail").warning("connecting")  # a breadcrumb of this attempt only
        raise ConnectionError("smtp refused")

    return q


def run_both_attempts(q: Queue) -> int:
    job_id = q.enqueue("send_welcome", {"email": "ann@example.com", "plan": "gold"})
    report = q.process_jobs()  # the retry is due at once: the same call runs it
    assert (report["retried"], report["failed"]) == (1, 1)
    return job_id


def test_a_final_failure_is_one_event_tagged_with_the_job(db_url: str, sentry: Init) -> None:
    sentry()
    q = failing_queue(db_url)
    job_id = run_both_attempts(q)
    [event] = items("event")  # not one per attempt, and not one more for tickq's ERROR line
    assert event["level"] == "error"
    assert event["tags"] == {"tickq.job.type": "send_welcome", "tickq.job.id": str(job_id),
                             "tickq.job.attempt": "2", "tickq.queue": "mail",
                             "tickq.job.outcome": "failed"}  # fmt: skip
    assert event["contexts"]["tickq"]["payload_keys"] == ["email", "plan"]
    assert "ann@example.com" not in json.dumps(event["contexts"])
    [exc] = event["exception"]["values"]
    assert (exc["type"], exc["value"]) == ("ConnectionError", "smtp refused")
    assert exc["mechanism"] == {"type": "tickq", "handled": False}
    assert [c["message"] for c in event["breadcrumbs"]["values"]] == ["connecting"]


def test_every_failed_attempt_when_asked(db_url: str, sentry: Init) -> None:
    sentry(tickq={"every_failed_attempt": True})
    q = failing_queue(db_url)
    run_both_attempts(q)
    events = items("event")
    assert [(e["level"], e["tags"]["tickq.job.attempt"]) for e in events] == [
        ("warning", "1"),
        ("error", "2"),
    ]
    assert [e["tags"]["tickq.job.outcome"] for e in events] == ["retried", "failed"]


def test_a_failure_tickq_did_not_report_still_makes_one_tagged_event(
    db_url: str, sentry: Init
) -> None:
    sentry()
    q = failing_queue(db_url)
    observe.unwatch(SentryWatcher)  # the integration is on, but no attempt reports
    run_both_attempts(q)
    [event] = items("event")  # made of tickq's ERROR line by Sentry's logging integration
    assert event["logger"] == "tickq"
    assert event["tags"]["tickq.job.type"] == "send_welcome"
    assert event["tags"]["tickq.job.attempt"] == "2"


def test_each_attempt_is_a_transaction_in_the_trace_that_enqueued_it(
    db_url: str, sentry: Init
) -> None:
    sentry(traces_sample_rate=1.0)
    q = failing_queue(db_url)
    with sentry_sdk.start_transaction(name="POST /signup", op="http.server") as request:
        job_id = q.enqueue("send_welcome", {"email": "ann@example.com", "plan": "gold"})
    assert q.process_jobs()["failed"] == 1
    attempts = [t for t in items("transaction") if t["transaction"] == "send_welcome"]
    assert len(attempts) == 2
    for number, attempt in enumerate(attempts, 1):
        context = attempt["contexts"]["trace"]
        assert context["trace_id"] == request.trace_id
        assert context["op"] == "queue.process" and context["status"] == "internal_error"
        assert context["data"]["messaging.message.id"] == str(job_id)
        assert context["data"]["messaging.destination.name"] == "mail"
        assert attempt["tags"]["tickq.job.attempt"] == str(number)
    [event] = items("event")
    assert event["contexts"]["trace"]["trace_id"] == request.trace_id
    [web] = [t for t in items("transaction") if t["transaction"] == "POST /signup"]
    [publish] = [s for s in web["spans"] if s["op"] == "queue.publish"]
    assert publish["description"] == "send_welcome"
    assert publish["data"]["messaging.message.id"] == str(job_id)
    assert publish["data"]["messaging.destination.name"] == "mail"
    assert attempts[0]["contexts"]["trace"]["parent_span_id"] == publish["span_id"]
    assert attempts[0]["contexts"]["trace"]["data"]["messaging.message.receive.latency"] >= 0


def test_a_tick_is_a_transaction_when_tracing(db_url: str, sentry: Init) -> None:
    sentry(traces_sample_rate=1.0)
    failing_queue(db_url).tick()
    [tick] = [t for t in items("transaction") if t["transaction"] == "tickq tick"]
    assert tick["contexts"]["trace"]["op"] == "queue.tick"


def test_without_the_integration_nothing_is_reported(db_url: str, sentry: Init) -> None:
    sentry()
    sentry_sdk.init(dsn="https://key@sentry.invalid/1", transport=Kept,
                    default_integrations=False)  # fmt: skip
    Kept.envelopes = []
    run_both_attempts(failing_queue(db_url))
    assert items("event") == []
